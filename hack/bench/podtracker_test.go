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
// and the SPIRE listings would feed it, and checks when it calls SPIRE exact and which
// latencies it reports.
func TestPodTrackerRollout(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	set := func(uids ...string) map[types.UID]bool {
		out := map[types.UID]bool{}
		for _, u := range uids {
			out[types.UID(u)] = true
		}
		return out
	}

	tr := newPodTracker()
	tr.observe(trackerPod("old-1", "v1", "node-a"), at(0))
	tr.observe(trackerPod("old-2", "v1", "node-a"), at(0))
	if tr.sawEntries(set("old-1", "old-2"), at(1), 2) {
		t.Fatal("exact before the rollout started")
	}
	tr.startRollout()

	// new-1 is created unscheduled and scheduled 10ms later; its entry is listed at 25ms.
	tr.observe(trackerPod("new-1", "v2", ""), at(100))
	tr.observe(trackerPod("new-1", "v2", "node-b"), at(110))
	if tr.sawEntries(set("old-1", "old-2", "new-1"), at(135), 2) {
		t.Fatal("exact with old entries left")
	}
	tr.forget("old-1")
	// new-2's entry is listed before the bench's informer sees it scheduled.
	if tr.sawEntries(set("old-2", "new-1", "new-2"), at(200), 2) {
		t.Fatal("exact with an old entry left")
	}
	tr.observe(trackerPod("new-2", "v2", "node-b"), at(210))
	tr.forget("old-2")
	if got := tr.runningPods(); len(got) != 2 {
		t.Errorf("running pods %v, want new-1 and new-2", got)
	}
	if !tr.sawEntries(set("new-1", "new-2"), at(300), 2) {
		t.Fatal("not exact with exactly the new pods' entries")
	}

	lat, unmeasured := tr.latencies()
	want := map[time.Duration]bool{25 * time.Millisecond: true, 0: true}
	got := map[time.Duration]bool{}
	for _, d := range lat {
		got[d] = true
	}
	if diff := cmp.Diff(want, got); diff != "" || unmeasured != 0 || len(lat) != 2 {
		t.Errorf("latencies %v with %d unmeasured, want 25ms and 0 (-want +got):\n%s", lat, unmeasured, diff)
	}
	if got := tr.replaced(); got != 2 {
		t.Errorf("replaced %d pods, want 2", got)
	}
}
