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
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// trackedPod is what the bench saw of one pod, with the times it saw it.
type trackedPod struct {
	name string
	// template is the pod-template-hash label: which ReplicaSet, so which template, made it.
	template string
	// scheduled is when the bench first saw the pod bound to a node.
	scheduled time.Time
	// running is true while the pod is Running and not being deleted: a pod to flap.
	running bool
	gone    bool
}

// podTracker records, from pod events and SPIRE queries, when each pod was scheduled and when
// SPIRE first served its entry, and tells which pods to look for in SPIRE and when every new
// pod's entry has been seen.
type podTracker struct {
	mu   sync.Mutex
	pods map[types.UID]*trackedPod
	// entrySeen is when a query first returned an entry for the pod UID.
	entrySeen map[types.UID]time.Time
	// oldTemplates are the templates of the pods present when the rollout started; nil before.
	oldTemplates map[string]bool
}

func newPodTracker() *podTracker {
	return &podTracker{pods: map[types.UID]*trackedPod{}, entrySeen: map[types.UID]time.Time{}}
}

// observe records an added or updated pod, seen at now.
func (t *podTracker) observe(pod *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pods[pod.UID]
	if p == nil {
		p = &trackedPod{name: pod.Name}
		t.pods[pod.UID] = p
	}
	p.template = pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	if p.scheduled.IsZero() && pod.Spec.NodeName != "" {
		p.scheduled = now
	}
	p.running = pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning
}

// forget records a deleted pod.
func (t *podTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pods[uid]; p != nil {
		p.gone, p.running = true, false
	}
}

// startRollout takes the templates of the pods present now as the old ones.
func (t *podTracker) startRollout() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.oldTemplates = map[string]bool{}
	for _, p := range t.pods {
		if !p.gone {
			t.oldTemplates[p.template] = true
		}
	}
}

// isNew says whether a pod is of a template made since the rollout started.
func (t *podTracker) isNew(p *trackedPod) bool {
	return t.oldTemplates != nil && !t.oldTemplates[p.template]
}

// sawEntry records that SPIRE served an entry for the pod UID at seenAt.
func (t *podTracker) sawEntry(uid types.UID, seenAt time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.entrySeen[uid]; !ok {
		t.entrySeen[uid] = seenAt
	}
}

// pending returns the live pods of the new template that are scheduled and whose entry SPIRE
// has not been seen serving yet: the pods to look for in SPIRE.
func (t *podTracker) pending() []types.UID {
	t.mu.Lock()
	defer t.mu.Unlock()
	var uids []types.UID
	for uid, p := range t.pods {
		if _, seen := t.entrySeen[uid]; !seen && !p.gone && !p.scheduled.IsZero() && t.isNew(p) {
			uids = append(uids, uid)
		}
	}
	return uids
}

// allNewSeen reports whether want live pods of the new template exist and SPIRE has been seen
// serving an entry for each: then SPIRE is exact once it holds want entries in all.
func (t *podTracker) allNewSeen(want int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := 0
	for uid, p := range t.pods {
		if p.gone || !t.isNew(p) {
			continue
		}
		if _, seen := t.entrySeen[uid]; !seen {
			return false
		}
		live++
	}
	return live == want
}

// latencies returns, for every pod of the new template, the time from the bench seeing it
// scheduled to a query first returning its entry, and how many new pods lack either time.
func (t *podTracker) latencies() (ds []time.Duration, unmeasured int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, p := range t.pods {
		if !t.isNew(p) {
			continue
		}
		seen, ok := t.entrySeen[uid]
		if !ok || p.scheduled.IsZero() {
			unmeasured++
			continue
		}
		ds = append(ds, seen.Sub(p.scheduled))
	}
	return ds, unmeasured
}

// replaced counts the pods of the old templates that are gone.
func (t *podTracker) replaced() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pods {
		if p.gone && t.oldTemplates != nil && t.oldTemplates[p.template] {
			n++
		}
	}
	return n
}

// runningPods returns the names of the pods Running now.
func (t *podTracker) runningPods() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for _, p := range t.pods {
		if p.running {
			names = append(names, p.name)
		}
	}
	return names
}
