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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// histogramSamples reads how many observations a histogram holds and their sum.
func histogramSamples(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestPodEntryLatencyIsObservedOncePerNewPod: a pod whose entries a pod sync writes is
// observed once, from its creation; a pod whose entry was already in SPIRE, as after a
// restart, is not observed at all; a pod whose first write fails is observed by the retry
// that completes it.
func TestPodEntryLatencyIsObservedOncePerNewPod(t *testing.T) {
	old := pod("production", "old", "node-1", map[string]string{"app": "web-server"})
	old.CreationTimestamp = metav1.NewTime(time.Now().Add(-24 * time.Hour))
	env := newTestEnv(t, []runtime.Object{namespace("production", map[string]string{"env": "production"}), node("node-1"), old},
		walkThroughClusterSPIFFEIDs()...)
	// The resync writes the old pod's entry: its pod sync then finds it in place.
	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatal(err)
	}
	count, _ := histogramSamples(t, metrics.PodEntryLatency)
	writes, _ := histogramSamples(t, metrics.PodSPIREWriteDuration)
	if err := env.controller.syncPod(env.ctx, old.UID); err != nil {
		t.Fatal(err)
	}
	if got, _ := histogramSamples(t, metrics.PodEntryLatency); got != count {
		t.Errorf("a pod whose entry was in place was observed: %d observations, want %d", got, count)
	}
	if got, _ := histogramSamples(t, metrics.PodSPIREWriteDuration); got != writes {
		t.Errorf("a sync that wrote nothing observed a SPIRE write")
	}

	fresh := pod("production", "fresh", "node-1", map[string]string{"app": "web-server"})
	fresh.CreationTimestamp = metav1.NewTime(time.Now().Add(-2 * time.Second))
	if _, err := env.kube.CoreV1().Pods("production").Create(env.ctx, fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPod(t, env, fresh.UID, true)
	count, sum := histogramSamples(t, metrics.PodEntryLatency)
	for range 2 {
		if err := env.controller.syncPod(env.ctx, fresh.UID); err != nil {
			t.Fatal(err)
		}
	}
	gotCount, gotSum := histogramSamples(t, metrics.PodEntryLatency)
	if gotCount != count+1 {
		t.Errorf("a new pod synced twice made %d observations, want 1", gotCount-count)
	}
	if latency := gotSum - sum; latency < 2 || latency > 60 {
		t.Errorf("observed latency = %.3fs, want about 2s from the pod's creation", latency)
	}
	if got, _ := histogramSamples(t, metrics.PodSPIREWriteDuration); got != writes+1 {
		t.Errorf("SPIRE write observations = %d, want the one sync that wrote", got-writes)
	}

	retried := pod("production", "retried", "node-1", map[string]string{"app": "web-server"})
	retried.CreationTimestamp = metav1.NewTime(time.Now())
	if _, err := env.kube.CoreV1().Pods("production").Create(env.ctx, retried, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPod(t, env, retried.UID, true)
	count, _ = histogramSamples(t, metrics.PodEntryLatency)
	env.spire.FailNext(spiretest.MethodBatchCreateEntry, 1, codes.Unavailable)
	if err := env.controller.syncPod(env.ctx, retried.UID); err == nil {
		t.Fatal("syncPod succeeded while SPIRE failed")
	}
	if got, _ := histogramSamples(t, metrics.PodEntryLatency); got != count {
		t.Errorf("a pod whose write failed was observed")
	}
	if err := env.controller.syncPod(env.ctx, retried.UID); err != nil {
		t.Fatal(err)
	}
	if got, _ := histogramSamples(t, metrics.PodEntryLatency); got != count+1 {
		t.Errorf("the retry that wrote the pod's entry made %d observations, want 1", got-count)
	}
}

// TestEntryOutcomesFollowStatus: the per-ClusterSPIFFEID entry counts equal the stats its
// status shows, and are dropped with the ClusterSPIFFEID.
func TestEntryOutcomesFollowStatus(t *testing.T) {
	web := pod("production", "web-server", "node-1", map[string]string{"app": "web-server"})
	pending := pod("production", "pending", "", map[string]string{"app": "web-server"})
	env := newTestEnv(t, []runtime.Object{namespace("production", map[string]string{"env": "production"}), node("node-1"), web, pending},
		walkThroughClusterSPIFFEIDs()...)
	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatal(err)
	}
	const name = "web-server-identity"
	if err := env.controller.syncClusterSPIFFEIDStatus(env.ctx, name); err != nil {
		t.Fatal(err)
	}
	outcomes := func() map[string]float64 {
		got := map[string]float64{}
		for _, outcome := range []string{"set", "masked", "entry_failure", "render_failure", "waiting_for_node"} {
			var m dto.Metric
			if err := metrics.ClusterSPIFFEIDEntries.WithLabelValues(name, outcome).Write(&m); err != nil {
				t.Fatal(err)
			}
			got[outcome] = m.GetGauge().GetValue()
		}
		return got
	}
	want := map[string]float64{"set": 1, "masked": 0, "entry_failure": 0, "render_failure": 0, "waiting_for_node": 1}
	if diff := cmp.Diff(want, outcomes()); diff != "" {
		t.Errorf("entry outcomes (-want +got):\n%s", diff)
	}

	if err := env.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Delete(env.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := env.controller.clusterSPIFFEIDs.lister.Get(name); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer never saw the ClusterSPIFFEID deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := env.controller.syncClusterSPIFFEIDStatus(env.ctx, name); err != nil {
		t.Fatal(err)
	}
	if n := metrics.ClusterSPIFFEIDEntries.DeletePartialMatch(prometheus.Labels{"clusterspiffeid": name}); n != 0 {
		t.Errorf("%d entry counts of a deleted ClusterSPIFFEID remained", n)
	}
}

// TestEligibleSinceCountsFromTheLaterOfPodAndDeclarer: a ClusterSPIFFEID created for pods
// that ran long before it counts from its own creation, not from the pods'.
func TestEligibleSinceCountsFromTheLaterOfPodAndDeclarer(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p := pod("production", "web", "node-1", nil)
	p.CreationTimestamp = metav1.NewTime(created)
	declared := func(declarerCreated time.Time) []*render.DeclaredEntry {
		return []*render.DeclaredEntry{{Declarer: render.Declarer{Kind: render.KindClusterSPIFFEID, Name: "c", Created: declarerCreated, PodUID: p.UID}}}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		declared []*render.DeclaredEntry
		want     time.Time
	}{
		{"declarer older than the pod", p, declared(created.Add(-time.Hour)), created},
		{"declarer created after the pod", p, declared(created.Add(time.Hour)), created.Add(time.Hour)},
		{"pod without a node", pod("production", "pending", "", nil), declared(created), time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eligibleSince(tt.pod, tt.declared); !got.Equal(tt.want) {
				t.Errorf("eligibleSince = %v, want %v", got, tt.want)
			}
		})
	}
}
