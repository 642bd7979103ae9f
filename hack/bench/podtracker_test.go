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

package main

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func trackerPod(uid, template, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, UID: types.UID(uid), Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: template}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// TestPodTrackerRollout walks the tracker through a rollout of two pods, as the pod informer
// and the SPIRE queries would feed it, and checks which pods it asks to look for, when it
// has seen every new pod's entry, and which latencies it reports.
func TestPodTrackerRollout(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	tr := newPodTracker()
	tr.observe(trackerPod("old-1", "v1", "node-a"), at(0))
	tr.observe(trackerPod("old-2", "v1", "node-a"), at(0))
	if got := tr.pending(); len(got) != 0 {
		t.Fatalf("pending %v before the rollout started, want none", got)
	}
	tr.startRollout()
	if got := tr.pending(); len(got) != 0 {
		t.Fatalf("pending %v with only old pods, want none", got)
	}

	// new-1 is created unscheduled and scheduled 10ms later; its entry is seen 25ms after.
	tr.observe(trackerPod("new-1", "v2", ""), at(100))
	if got := tr.pending(); len(got) != 0 {
		t.Fatalf("pending %v with new-1 unscheduled, want none", got)
	}
	tr.observe(trackerPod("new-1", "v2", "node-b"), at(110))
	if diff := cmp.Diff([]types.UID{"new-1"}, tr.pending()); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	tr.sawEntry("new-1", at(135))
	tr.sawEntry("new-1", at(500)) // Only the first sighting counts.
	if tr.allNewSeen(2) {
		t.Fatal("all new seen with one new pod")
	}
	tr.forget("old-1")
	tr.observe(trackerPod("new-2", "v2", "node-b"), at(200))
	tr.forget("old-2")
	if got := tr.runningPods(); len(got) != 2 {
		t.Errorf("running pods %v, want new-1 and new-2", got)
	}
	if tr.allNewSeen(2) {
		t.Fatal("all new seen without new-2's entry")
	}
	tr.sawEntry("new-2", at(240))
	if got := tr.pending(); len(got) != 0 {
		t.Fatalf("pending %v after every entry was seen, want none", got)
	}
	if !tr.allNewSeen(2) {
		t.Fatal("not all new seen with both new pods' entries seen")
	}

	lat, unmeasured := tr.latencies()
	slices.Sort(lat)
	if diff := cmp.Diff([]time.Duration{25 * time.Millisecond, 40 * time.Millisecond}, lat); diff != "" || unmeasured != 0 {
		t.Errorf("latencies with %d unmeasured (-want +got):\n%s", unmeasured, diff)
	}
	if got := tr.replaced(); got != 2 {
		t.Errorf("replaced %d pods, want 2", got)
	}
}
