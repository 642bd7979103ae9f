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
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// TestTrimmedPodsGiveTheSameEntries runs the same cluster and the same pod events through a
// controller whose pod cache holds whole pods and one whose cache holds what
// informercache.NewTrim keeps, as every factory of the binary does: SPIRE must end up with the
// same entries after the first resync and after each event, and the ClusterSPIFFEIDs with the
// same stats. One ClusterSPIFFEID reads the image of a pod's container, which the cache does
// not keep: its pods, and only those, are read whole from the API server each time they are
// rendered.
func TestTrimmedPodsGiveTheSameEntries(t *testing.T) {
	withImage := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/" + p.Name}}
		return p
	}
	objects := func() []runtime.Object {
		return []runtime.Object{
			namespace("production", map[string]string{"env": "production"}),
			namespace("development", map[string]string{"env": "development"}),
			node("node-1"), node("node-3"),
			withImage(pod("production", "web-server", "node-1", map[string]string{"app": "web-server"})),
			withImage(pod("production", "web-server-2", "node-3", map[string]string{"app": "web-server"})),
			withImage(pod("development", "api-server", "node-3", map[string]string{"app": "api-server"})),
			withImage(pod("development", "unscheduled", "", map[string]string{"app": "api-server"})),
		}
	}
	clusterSPIFFEIDs := append(walkThroughClusterSPIFFEIDs(), clusterSPIFFEID("image-identity", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/image/{{ (index .PodSpec.Containers 0).Image }}",
		PodSelector:      selector(map[string]string{"app": "web-server"}),
	}))
	type step struct {
		name string
		do   func(ctx context.Context, env *testEnv) error
	}
	steps := []step{
		{"first resync", func(ctx context.Context, env *testEnv) error { return env.controller.fullResync(ctx) }},
		{"labels changed", func(ctx context.Context, env *testEnv) error {
			p := withImage(pod("production", "web-server-2", "node-3", map[string]string{"app": "other"}))
			p.ResourceVersion = "2" // The fake clientset keeps resource versions as given.
			_, err := env.kube.CoreV1().Pods("production").Update(ctx, p, metav1.UpdateOptions{})
			return err
		}},
		{"image changed", func(ctx context.Context, env *testEnv) error {
			p := withImage(pod("production", "web-server", "node-1", map[string]string{"app": "web-server"}))
			p.Spec.Containers[0].Image = "registry.example/web-server-v2"
			// The API server bumps the generation of a pod whose spec changes.
			p.ResourceVersion, p.Generation = "2", 2
			_, err := env.kube.CoreV1().Pods("production").Update(ctx, p, metav1.UpdateOptions{})
			return err
		}},
		{"pod created", func(ctx context.Context, env *testEnv) error {
			_, err := env.kube.CoreV1().Pods("development").Create(ctx,
				withImage(pod("development", "api-server-2", "node-1", map[string]string{"app": "api-server"})), metav1.CreateOptions{})
			return err
		}},
		{"pod deleted", func(ctx context.Context, env *testEnv) error {
			return env.kube.CoreV1().Pods("production").Delete(ctx, "web-server", metav1.DeleteOptions{})
		}},
	}

	outcomes := map[bool][]string{}
	for _, trimmed := range []bool{false, true} {
		env := newTestEnvWith(t, envOptions{trimmedPods: trimmed}, objects(), clusterSPIFFEIDs...)
		cached := env.podStore.List()[0].(*corev1.Pod)
		if hasSpec := len(cached.Spec.Containers) > 0; hasSpec == trimmed {
			t.Fatalf("trimmed=%v: the cached pod has containers: %v", trimmed, hasSpec)
		}
		env.kube.ClearActions()
		for _, s := range steps {
			if err := s.do(env.ctx, env); err != nil {
				t.Fatalf("trimmed=%v: %s: %v", trimmed, s.name, err)
			}
			drainPodQueue(t, env)
			outcomes[trimmed] = append(outcomes[trimmed], s.name+": "+describeEntries(env.spire.Entries()))
		}
		for _, name := range []string{"web-server-identity", "api-server-identity", "image-identity"} {
			c, err := env.controller.clusterSPIFFEIDs.lister.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			var stats spirev1alpha1.ClusterSPIFFEIDStats
			unscheduled, err := env.controller.selectionStats(env.controller.clusterSPIFFEIDs.compiled.Get(c), &stats)
			if err != nil {
				t.Fatal(err)
			}
			outcomes[trimmed] = append(outcomes[trimmed], fmt.Sprintf("%s: %d selected, %d unscheduled", name, stats.PodsSelected, unscheduled))
		}
		// Each render of a pod the image-identity selects reads it whole: the resync's two, and
		// the sync after the image change; the label change unselects web-server-2, which is
		// then rendered from the cache, and a deleted pod is not rendered.
		var read []string
		for _, a := range env.kube.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
				read = append(read, a.(k8stesting.GetAction).GetName())
			}
		}
		slices.Sort(read)
		if want := []string{"web-server", "web-server", "web-server-2"}; !slices.Equal(read, want) {
			t.Errorf("trimmed=%v: pods read whole %v, want %v", trimmed, read, want)
		}
	}
	if diff := cmp.Diff(outcomes[false], outcomes[true]); diff != "" {
		t.Errorf("entries and stats (-whole pods +trimmed pods):\n%s", diff)
	}
	// The outcomes must show what the steps did, or their equality proves little.
	if !strings.Contains(outcomes[true][0], "web-server-2") || !strings.Contains(outcomes[true][0], "/image/registry.example/web-server<") ||
		strings.Contains(outcomes[true][1], "/image/registry.example/web-server-2") ||
		!strings.Contains(outcomes[true][2], "/image/registry.example/web-server-v2") ||
		!strings.Contains(outcomes[true][3], "api-server-2") || strings.Contains(outcomes[true][4], "uid-production-web-server,") {
		t.Errorf("the steps did not change the entries as expected:\n%s", strings.Join(outcomes[true], "\n"))
	}
}

// drainPodQueue syncs queued pods until the queue stays empty for a while: informer events
// reach it asynchronously.
func drainPodQueue(t *testing.T, env *testEnv) {
	t.Helper()
	quiet := time.Now()
	for time.Since(quiet) < 200*time.Millisecond {
		if env.controller.podQueue.Len() == 0 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		uid, _ := env.controller.podQueue.Get()
		if err := env.controller.syncPod(env.ctx, uid); err != nil {
			t.Fatalf("syncPod %s: %v", uid, err)
		}
		env.controller.podQueue.Done(uid)
		env.controller.podQueue.Forget(uid)
		quiet = time.Now()
	}
}

// describeEntries lists entries by SPIFFE ID, parent ID and selectors, without their IDs.
func describeEntries(entries []*spiretypes.Entry) string {
	var out []string
	for _, e := range entries {
		var sels []string
		for _, s := range e.Selectors {
			sels = append(sels, s.Type+":"+s.Value)
		}
		slices.Sort(sels)
		out = append(out, fmt.Sprintf("%s<-%s[%s]%v", e.SpiffeId.Path, e.ParentId.Path, strings.Join(sels, ","), e.DnsNames))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestFailedWholePodReadKeepsEntries: when a pod a ClusterSPIFFEID reads whole cannot be read,
// its sync and the full resync fail, and so are retried with backoff, and its entries stay;
// when the API server answers that the pod is gone, its entries go.
func TestFailedWholePodReadKeepsEntries(t *testing.T) {
	web := pod("production", "web-server", "node-1", map[string]string{"app": "web-server"})
	web.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/web"}}
	env := newTestEnvWith(t, envOptions{trimmedPods: true}, []runtime.Object{
		namespace("production", map[string]string{"env": "production"}), node("node-1"), web,
	}, clusterSPIFFEID("image-identity", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/image/{{ (index .PodSpec.Containers 0).Image }}",
	}))
	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatal(err)
	}
	want := describeEntries(env.spire.Entries())
	if !strings.Contains(want, "/image/registry.example/web<") {
		t.Fatalf("SPIRE holds %s, want the image entry", want)
	}

	answer := error(errors.New("connection refused"))
	env.kube.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, answer
	})
	if err := env.controller.syncPod(env.ctx, web.UID); err == nil {
		t.Error("syncPod succeeded without reading the pod")
	}
	if err := env.controller.fullResync(env.ctx); err == nil {
		t.Error("the full resync succeeded without reading the pod")
	}
	if got := describeEntries(env.spire.Entries()); got != want {
		t.Errorf("after failed reads SPIRE holds %s, want %s", got, want)
	}

	answer = apierrors.NewNotFound(corev1.Resource("pods"), web.Name)
	if err := env.controller.syncPod(env.ctx, web.UID); err != nil {
		t.Fatal(err)
	}
	if got := env.spire.Entries(); len(got) != 0 {
		t.Errorf("SPIRE holds %s for a pod the API server no longer has", describeEntries(got))
	}
}
