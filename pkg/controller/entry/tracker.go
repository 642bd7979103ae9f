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
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// outcome is what became of one ClusterSPIFFEID's entry for one pod.
type outcome int

const (
	// outcomeSet: the entry is declared and SPIRE holds it.
	outcomeSet outcome = iota
	// outcomeMasked: an older declarer of the same entry wins.
	outcomeMasked
	// outcomeRenderFailure: the templates did not render a valid entry for the pod.
	outcomeRenderFailure
	// outcomeEntryFailure: SPIRE refused or failed the write.
	outcomeEntryFailure
)

// podOutcomes maps ClusterSPIFFEID names to the outcome of their entry for one pod.
type podOutcomes map[string]outcome

// outcomeTracker remembers, per pod, the outcome of every ClusterSPIFFEID that applies to it.
// It is the source of the per-pod counters in ClusterSPIFFEID status, and it tells which pods a
// ClusterSPIFFEID applied to before it changed, so that those pods are re-synced as well.
type outcomeTracker struct {
	mu         sync.Mutex
	byPod      map[types.UID]podOutcomes
	byIdentity map[string]map[types.UID]outcome
}

func newOutcomeTracker() *outcomeTracker {
	return &outcomeTracker{byPod: map[types.UID]podOutcomes{}, byIdentity: map[string]map[types.UID]outcome{}}
}

// record sets a pod's outcomes (nil or empty for a pod no identity applies to) and returns the
// names of the ClusterSPIFFEIDs whose counters changed.
func (t *outcomeTracker) record(uid types.UID, outs podOutcomes) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recordLocked(uid, outs)
}

func (t *outcomeTracker) recordLocked(uid types.UID, outs podOutcomes) []string {
	old := t.byPod[uid]
	var changed []string
	update := func(name string) {
		o, inOld := old[name]
		n, inNew := outs[name]
		if inOld == inNew && o == n {
			return
		}
		changed = append(changed, name)
		if inNew {
			if t.byIdentity[name] == nil {
				t.byIdentity[name] = map[types.UID]outcome{}
			}
			t.byIdentity[name][uid] = n
			return
		}
		delete(t.byIdentity[name], uid)
		if len(t.byIdentity[name]) == 0 {
			delete(t.byIdentity, name)
		}
	}
	for name := range old {
		update(name)
	}
	for name := range outs {
		if _, inOld := old[name]; !inOld {
			update(name)
		}
	}
	if len(outs) == 0 {
		delete(t.byPod, uid)
	} else {
		t.byPod[uid] = maps.Clone(outs)
	}
	return changed
}

// replaceAll sets the outcomes of every pod at once, as a full resync computes them, and
// returns the names of the ClusterSPIFFEIDs whose counters may have changed.
func (t *outcomeTracker) replaceAll(all map[types.UID]podOutcomes) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := map[string]struct{}{}
	for uid := range t.byPod {
		if _, ok := all[uid]; !ok {
			for _, name := range t.recordLocked(uid, nil) {
				changed[name] = struct{}{}
			}
		}
	}
	for uid, outs := range all {
		for _, name := range t.recordLocked(uid, outs) {
			changed[name] = struct{}{}
		}
	}
	return keys(changed)
}

// pods returns the pods a ClusterSPIFFEID applied to when they were last synced.
func (t *outcomeTracker) pods(name string) []types.UID {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]types.UID, 0, len(t.byIdentity[name]))
	for uid := range t.byIdentity[name] {
		out = append(out, uid)
	}
	return out
}

// stats fills the per-pod counters of a ClusterSPIFFEID's status.
func (t *outcomeTracker) stats(name string, stats *spirev1alpha1.ClusterSPIFFEIDStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	stats.PodsSelected = len(t.byIdentity[name])
	stats.PodEntryRenderFailures, stats.EntriesMasked, stats.EntriesToSet, stats.EntryFailures = 0, 0, 0, 0
	for _, o := range t.byIdentity[name] {
		switch o {
		case outcomeSet:
			stats.EntriesToSet++
		case outcomeMasked:
			stats.EntriesMasked++
		case outcomeRenderFailure:
			stats.PodEntryRenderFailures++
		case outcomeEntryFailure:
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
