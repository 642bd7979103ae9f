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

package reconciler

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// Outcome is what became of one ClusterSPIFFEID's entry for one pod.
type Outcome int

const (
	// OutcomeSet: the entry is declared and SPIRE holds it.
	OutcomeSet Outcome = iota
	// OutcomeMasked: an older declarer of the same entry wins.
	OutcomeMasked
	// OutcomeRenderFailure: the templates did not render a valid entry for the pod.
	OutcomeRenderFailure
	// OutcomeEntryFailure: SPIRE refused or failed the write.
	OutcomeEntryFailure
)

// PodOutcomes maps ClusterSPIFFEID names to the Outcome of their entry for one pod.
type PodOutcomes map[string]Outcome

// StatusCounters remembers, per pod, the Outcome of every ClusterSPIFFEID that applies to it.
// It is the source of the per-pod counters in ClusterSPIFFEID status, and it tells which pods a
// ClusterSPIFFEID applied to before it changed, so that those pods are re-synced as well.
//
// Outcomes are kept per ClusterSPIFFEID only: a pod's are found by asking each of them, of
// which a cluster has a handful, and a second map per pod would cost a map header and a table
// for each of tens of thousands of pods.
type StatusCounters struct {
	mu                sync.Mutex
	byClusterSPIFFEID map[string]map[types.UID]Outcome
}

// NewStatusCounters returns counters that know of no pod.
func NewStatusCounters() *StatusCounters {
	return &StatusCounters{byClusterSPIFFEID: map[string]map[types.UID]Outcome{}}
}

// Record sets a pod's outcomes (nil or empty for a pod no ClusterSPIFFEID applies to) and
// returns the names of the ClusterSPIFFEIDs whose counters changed.
func (t *StatusCounters) Record(uid types.UID, outs PodOutcomes) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recordLocked(uid, outs)
}

func (t *StatusCounters) recordLocked(uid types.UID, outs PodOutcomes) []string {
	var changed []string
	for name, pods := range t.byClusterSPIFFEID {
		if _, inNew := outs[name]; inNew {
			continue
		}
		if _, inOld := pods[uid]; inOld {
			changed = append(changed, name)
			delete(pods, uid)
			if len(pods) == 0 {
				delete(t.byClusterSPIFFEID, name)
			}
		}
	}
	for name, n := range outs {
		pods := t.byClusterSPIFFEID[name]
		if o, inOld := pods[uid]; inOld && o == n {
			continue
		}
		changed = append(changed, name)
		if pods == nil {
			pods = map[types.UID]Outcome{}
			t.byClusterSPIFFEID[name] = pods
		}
		pods[uid] = n
	}
	return changed
}

// replaceAllExcept sets the outcomes of every pod at once, as a full resync computes them,
// but for the pods keep reports: syncs recorded them while the resync ran, and theirs are the
// newer outcomes. It returns the names of the ClusterSPIFFEIDs whose counters may have changed.
func (t *StatusCounters) replaceAllExcept(all map[types.UID]PodOutcomes, keep func(types.UID) bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := map[string]struct{}{}
	for name, pods := range t.byClusterSPIFFEID {
		for uid := range pods {
			if _, ok := all[uid][name]; !ok && !keep(uid) {
				changed[name] = struct{}{}
				delete(pods, uid)
			}
		}
		if len(pods) == 0 {
			delete(t.byClusterSPIFFEID, name)
		}
	}
	for uid, outs := range all {
		if keep(uid) {
			continue
		}
		for _, name := range t.recordLocked(uid, outs) {
			changed[name] = struct{}{}
		}
	}
	return keys(changed)
}

// Pods returns the pods a ClusterSPIFFEID applied to when they were last synced.
func (t *StatusCounters) Pods(name string) []types.UID {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]types.UID, 0, len(t.byClusterSPIFFEID[name]))
	for uid := range t.byClusterSPIFFEID[name] {
		out = append(out, uid)
	}
	return out
}

// Stats fills the per-pod outcome counters of a ClusterSPIFFEID's status: render failures,
// entries to set and masked, write failures. podsSelected is the caller's: it counts pods
// that have no outcome (a fallback skipped, a finished pod).
func (t *StatusCounters) Stats(name string, stats *spirev1alpha1.ClusterSPIFFEIDStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	stats.PodEntryRenderFailures, stats.EntriesMasked, stats.EntriesToSet, stats.EntryFailures = 0, 0, 0, 0
	for _, o := range t.byClusterSPIFFEID[name] {
		switch o {
		case OutcomeSet:
			stats.EntriesToSet++
		case OutcomeMasked:
			stats.EntriesMasked++
		case OutcomeRenderFailure:
			stats.PodEntryRenderFailures++
		case OutcomeEntryFailure:
			stats.EntriesToSet++
			stats.EntryFailures++
		}
	}
}

func keys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}
