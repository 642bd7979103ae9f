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
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// statusUpdates returns "kind/name" of every UpdateStatus the fake clientset received.
func statusUpdates(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			obj := a.(k8stesting.UpdateAction).GetObject().(metav1.Object)
			out = append(out, a.GetResource().Resource+"/"+obj.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// eventsCreated returns the reasons of the Events created through the fake clientset.
func eventsCreated(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() == "create" && a.GetResource().Resource == "events" {
			out = append(out, a.(k8stesting.CreateAction).GetObject().(*corev1.Event).Reason)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDryRunWritesNothing drives the syncs that write status and record Events: a full resync
// over a pod one ClusterSPIFFEID renders and one cannot, then the status of both
// ClusterSPIFFEIDs and of an invalid ClusterStaticEntry. Without a dry run they write two
// ClusterSPIFFEID statuses and one ClusterStaticEntry status, and record RenderFailed and
// InvalidSpec Events; that case shows the test sees writes when there are some. In a dry run
// neither SPIRE, nor status, nor Events are written.
func TestDryRunWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name            string
		dryRun          bool
		wantStatus      []string
		wantEvents      []string
		wantSPIREWrites bool
	}{
		{name: "normal run", wantSPIREWrites: true,
			wantStatus: []string{"clusterspiffeids/broken", "clusterspiffeids/web-server-identity", "clusterstaticentries/invalid"},
			wantEvents: []string{spirev1alpha1.ReasonInvalidSpec, spirev1alpha1.ReasonRenderFailed}},
		{name: "dry run", dryRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			web := pod("production", "web-server", "node-1", map[string]string{"app": "web-server"})
			broken := clusterSPIFFEID("broken", time.Minute, spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://evil.org/x"})
			invalid := &spirev1alpha1.ClusterStaticEntry{ObjectMeta: metav1.ObjectMeta{Name: "invalid", Generation: 1},
				Spec: spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server"}}
			env := newTestEnvWith(t,
				envOptions{kubeClient: true, dryRun: tc.dryRun, wrapSPIRE: func(api spire.API) spire.EntryClient {
					if tc.dryRun {
						return spire.DryRun(api, nil)
					}
					return api
				}},
				[]runtime.Object{namespace("production", map[string]string{"env": "production"}), node("node-1"), web},
				append(walkThroughClusterSPIFFEIDs(), broken, invalid)...)
			env.controller.events.Start()
			t.Cleanup(env.controller.events.Shutdown)
			env.kube.ClearActions()
			env.spireAPI.ClearActions()

			if err := env.controller.fullResync(env.ctx); err != nil {
				t.Fatalf("fullResync: %v", err)
			}
			for _, name := range []string{"web-server-identity", "broken"} {
				if err := env.controller.syncClusterSPIFFEIDStatus(env.ctx, name); err != nil {
					t.Fatalf("syncClusterSPIFFEIDStatus(%s): %v", name, err)
				}
			}
			if err := env.controller.syncClusterStaticEntry(env.ctx, "invalid"); err != nil {
				t.Fatalf("syncClusterStaticEntry: %v", err)
			}

			if got := env.spire.WriteCalls() > 0; got != tc.wantSPIREWrites {
				t.Errorf("SPIRE writes made = %v, want %v", got, tc.wantSPIREWrites)
			}
			if got := statusUpdates(env.spireAPI.Actions()); !slices.Equal(got, tc.wantStatus) {
				t.Errorf("status updates = %q, want %q", got, tc.wantStatus)
			}
			// Events are sent asynchronously: wait for the expected ones, and give unexpected
			// ones as long to show up as the expected ones take in the normal run.
			deadline := time.Now().Add(2 * time.Second)
			var got []string
			for {
				got = eventsCreated(env.kube.Actions())
				if slices.Equal(got, tc.wantEvents) && len(got) > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !slices.Equal(got, tc.wantEvents) {
				t.Errorf("Events created with reasons %q, want %q", got, tc.wantEvents)
			}
		})
	}
}
