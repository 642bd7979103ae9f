/*
Copyright 2026 The spire-registrar Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package entry

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// The tests in this file pin the entry semantics of spire-controller-manager 0.7.0 that a
// swap must not change.

func statsAfterResync(t *testing.T, env *testEnv, names ...string) map[string]spirev1alpha1.ClusterSPIFFEIDStats {
	t.Helper()
	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatalf("fullResync: %v", err)
	}
	out := map[string]spirev1alpha1.ClusterSPIFFEIDStats{}
	for _, name := range names {
		if err := env.controller.syncClusterSPIFFEIDStatus(env.ctx, name); err != nil {
			t.Fatalf("syncClusterSPIFFEIDStatus(%s): %v", name, err)
		}
		got, err := env.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(env.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = got.Status.Stats
	}
	return out
}

// TestStatsCountAsSCM: namespacesSelected includes ignored namespaces; podsSelected counts every
// selected pod outside them, including pods a fallback is skipped for, finished pods and pods
// not yet scheduled; a pod without a node is a render failure; a spec that does not compile
// counts nothing.
func TestStatsCountAsSCM(t *testing.T) {
	const tmpl = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"
	app := map[string]string{"app": "web"}
	running := pod("production", "running", "node-1", app)
	pending := pod("production", "pending", "", app)
	done := pod("production", "done", "node-1", app)
	done.Status.Phase = corev1.PodSucceeded
	ignored := pod("spire-server", "ignored", "node-1", app)
	all := selector(map[string]string{"env": "prod"})
	env := newTestEnvWith(t, envOptions{ignoreNamespace: func(ns string) bool { return strings.Contains(ns, "spire") }},
		[]runtime.Object{
			namespace("production", map[string]string{"env": "prod"}), namespace("spire-server", map[string]string{"env": "prod"}),
			node("node-1"), running, pending, done, ignored,
		},
		clusterSPIFFEID("regular", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tmpl, NamespaceSelector: all, PodSelector: selector(app)}),
		clusterSPIFFEID("fallback", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tmpl + "/fb", NamespaceSelector: all,
			PodSelector: selector(app), Fallback: true}),
		clusterSPIFFEID("invalid", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tmpl + "{{", NamespaceSelector: all}),
	)

	got := statsAfterResync(t, env, "regular", "fallback", "invalid")
	want := map[string]spirev1alpha1.ClusterSPIFFEIDStats{
		// running: set; pending: fails (no node); done: selected, no entry (finished pods
		// lose their entries, a deliberate difference).
		"regular": {NamespacesSelected: 2, NamespacesIgnored: 1, PodsSelected: 3, EntriesToSet: 1, PodEntryRenderFailures: 1},
		// Skipped for running (regular rendered), applies to pending, which regular failed.
		"fallback": {NamespacesSelected: 2, NamespacesIgnored: 1, PodsSelected: 3, PodEntryRenderFailures: 1},
		"invalid":  {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

// TestMaskingAsSCM: among declarers of one entry the older wins even while it is being
// deleted; at equal creation times (one-second resolution) one not being deleted wins, then the
// lower UID.
func TestMaskingAsSCM(t *testing.T) {
	const tmpl = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"
	created := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	mk := func(name, uid string, age time.Duration, deleting bool) *spirev1alpha1.ClusterSPIFFEID {
		c := clusterSPIFFEID(name, 0, spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tmpl})
		c.UID, c.CreationTimestamp = ktypes.UID(uid), metav1.NewTime(created.Add(-age))
		if deleting {
			now := metav1.Now()
			c.DeletionTimestamp = &now
			c.Finalizers = []string{"example.org/hold"}
		}
		return c
	}
	for _, tc := range []struct {
		name           string
		objs           []runtime.Object
		winner, masked string
	}{
		{"older one being deleted still wins", []runtime.Object{mk("a", "2", time.Second, true), mk("b", "1", 0, false)}, "a", "b"},
		{"equal times: not being deleted wins", []runtime.Object{mk("a", "1", 0, true), mk("b", "2", 0, false)}, "b", "a"},
		{"equal times: lower UID wins", []runtime.Object{mk("a", "2", 0, false), mk("b", "1", 0, false)}, "b", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			web := pod("production", "web", "node-1", nil)
			env := newTestEnv(t, []runtime.Object{namespace("production", nil), node("node-1"), web}, tc.objs...)
			got := statsAfterResync(t, env, "a", "b")
			if got[tc.winner].EntriesToSet != 1 || got[tc.masked].EntriesMasked != 1 {
				t.Errorf("stats %+v, want %s to set the entry and %s masked", got, tc.winner, tc.masked)
			}
		})
	}
}
