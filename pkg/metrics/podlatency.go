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

package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodEligibleSince is when a pod became eligible for entries: the last transition of its
// PodScheduled condition to True, or, when the pod carries no such condition (it was created
// with spec.nodeName set, or the informer's cache dropped its conditions), its creation. It is
// zero for a pod that is not scheduled.
func PodEligibleSince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if pod.Spec.NodeName == "" {
		return time.Time{}
	}
	return pod.CreationTimestamp.Time
}

// PodSync is what one sync of one pod did, as PodEntryLatencyTracker needs it.
type PodSync struct {
	// Gone is set when the pod no longer exists: the tracker forgets it.
	Gone bool
	// Eligible is when the pod could first have had its entries: PodEligibleSince, or the
	// creation of a resource declaring them if that is later. Zero when it is not eligible.
	Eligible time.Time
	// HadEntries is set when SPIRE held some of the pod's entries before the sync.
	HadEntries bool
	// Wrote is set when the sync created or updated at least one of the pod's entries.
	Wrote bool
	// Complete is set when, after the sync, SPIRE holds every entry the pod declares.
	Complete bool
}

// podLatencyState is where a pod stands on the way to its one observation.
type podLatencyState int

const (
	// unseen: no sync has found or written any of the pod's entries yet (the zero value).
	unseen podLatencyState = iota
	// writing: this process wrote the pod's first entries; some are still missing.
	writing
	// settled: observed, or its entries were found in SPIRE, written before this process saw
	// the pod (before a restart, by another replica, or by a full resync). Never observed again.
	settled
)

// PodEntryLatencyTracker observes spire_registrar_pod_entry_latency_seconds. A pod is observed
// at most once per process, and only if this process gave it its identity:
//
//   - the first sync that finds or writes any of the pod's entries decides. If SPIRE already
//     held some of them, the pod is never observed: its entries predate this process's writes
//     (a restart finds the entries of old pods in place, so it observes nothing for them).
//     If the sync created or updated some, the pod is this process's to observe.
//   - such a pod is observed at the end of the first sync that leaves SPIRE holding every
//     entry it declares (entries masked by another declarer count as held, since their winner
//     is; entries that fail to render are not declared), from Eligible to then.
//
// Entries a full resync writes are not seen here: a pod created while the controller was down
// gets its entries from the first resync, and its next sync finds them in place. A pod's state
// is forgotten when the pod is gone, so memory follows the pods.
type PodEntryLatencyTracker struct {
	observer prometheus.Observer
	now      func() time.Time

	mu   sync.Mutex
	pods map[types.UID]podLatencyState
}

// NewPodEntryLatencyTracker returns a tracker observing PodEntryLatency.
func NewPodEntryLatencyTracker() *PodEntryLatencyTracker {
	return newPodEntryLatencyTracker(PodEntryLatency, time.Now)
}

func newPodEntryLatencyTracker(observer prometheus.Observer, now func() time.Time) *PodEntryLatencyTracker {
	return &PodEntryLatencyTracker{observer: observer, now: now, pods: map[types.UID]podLatencyState{}}
}

// Synced records what a sync of the pod did. It returns the latency it observed, if it did.
func (t *PodEntryLatencyTracker) Synced(uid types.UID, s PodSync) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.Gone {
		delete(t.pods, uid)
		return 0, false
	}
	state := t.pods[uid]
	if state == unseen {
		switch {
		case s.HadEntries:
			t.pods[uid] = settled
			return 0, false
		case !s.Wrote:
			return 0, false
		}
		state = writing
	}
	if state == settled || !s.Complete {
		t.pods[uid] = state
		return 0, false
	}
	t.pods[uid] = settled
	if s.Eligible.IsZero() {
		return 0, false
	}
	// The apiserver's clock may run ahead of ours.
	latency := max(t.now().Sub(s.Eligible), 0)
	t.observer.Observe(latency.Seconds())
	return latency, true
}
