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
	"cmp"
	"slices"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// plan is what it takes to make the current entries equal to the declared ones.
type plan struct {
	// toCreate are declared entries SPIRE lacks.
	toCreate []*render.DeclaredEntry
	// toUpdate are current entries to rewrite, keeping their IDs.
	toUpdate []*entryUpdate
	// toDelete are current entries nobody declares, and duplicates of declared ones.
	toDelete []*spiretypes.Entry
	// inSync are declared entries SPIRE already holds as declared.
	inSync []*render.DeclaredEntry
	// masked are declared entries that lose to an older declarer of the same entry.
	masked []*render.DeclaredEntry
}

// entryUpdate rewrites current with desired's fields; the mask says which.
type entryUpdate struct {
	current *spiretypes.Entry
	desired *render.DeclaredEntry
	mask    *spiretypes.EntryMask
}

// reconcile computes the plan that turns current into declared. It is pure and is the one
// truth for both scopes the controller syncs: one pod's entries, and every entry at a resync.
//
// Entries are matched by key. Among declarers of one key the oldest wins and the rest are
// masked; among current entries of one key the oldest is kept (its ID reused, only outdated
// fields updated) and the rest deleted. A create and a delete for the same pod are paired into
// an update, so an edited template rewrites a pod's entry in place instead of replacing it.
//
// unsupported are the fields the server does not keep; they are never reasons to update.
func reconcile(declared []*render.DeclaredEntry, current []*spiretypes.Entry, unsupported unsupportedFields) plan {
	var p plan

	winners := map[render.Key]*render.DeclaredEntry{}
	for _, d := range declared {
		if w, ok := winners[d.Key]; ok {
			if d.Declarer.Compare(w.Declarer) < 0 {
				winners[d.Key], d = d, w
			}
			p.masked = append(p.masked, d)
			continue
		}
		winners[d.Key] = d
	}

	existing := map[render.Key]*spiretypes.Entry{}
	for _, e := range sortedOldestFirst(current) {
		k := render.KeyOf(e)
		if _, ok := existing[k]; ok {
			p.toDelete = append(p.toDelete, e)
			continue
		}
		existing[k] = e
	}

	for _, k := range sortedKeys(winners) {
		d := winners[k]
		e, ok := existing[k]
		if !ok {
			p.toCreate = append(p.toCreate, d)
			continue
		}
		delete(existing, k)
		if mask := outdatedFields(e, d.Entry, unsupported); mask != nil {
			p.toUpdate = append(p.toUpdate, &entryUpdate{current: e, desired: d, mask: mask})
		} else {
			p.inSync = append(p.inSync, d)
		}
	}
	for _, k := range sortedKeys(existing) {
		p.toDelete = append(p.toDelete, existing[k])
	}

	p.pairReplacements()
	sortDeclared(p.masked)
	return p
}

// pairReplacements turns a create and a delete of the same pod into one update of the
// deleted entry, so the pod keeps an entry, and its entry ID, throughout.
func (p *plan) pairReplacements() {
	deletable := map[types.UID][]*spiretypes.Entry{}
	for _, e := range p.toDelete {
		if uid := render.PodUIDOf(e); uid != "" {
			deletable[uid] = append(deletable[uid], e)
		}
	}
	if len(deletable) == 0 {
		return
	}
	reused := map[string]bool{}
	creates := p.toCreate[:0]
	for _, d := range p.toCreate {
		candidates := deletable[d.Declarer.PodUID]
		if d.Declarer.PodUID == "" || len(candidates) == 0 {
			creates = append(creates, d)
			continue
		}
		e := candidates[0]
		deletable[d.Declarer.PodUID] = candidates[1:]
		reused[e.GetId()] = true
		p.toUpdate = append(p.toUpdate, &entryUpdate{current: e, desired: d, mask: replaceMask()})
	}
	p.toCreate = creates
	p.toDelete = slices.DeleteFunc(p.toDelete, func(e *spiretypes.Entry) bool { return reused[e.GetId()] })
}

// sortedOldestFirst orders entries by creation time, then ID, without touching the input.
func sortedOldestFirst(entries []*spiretypes.Entry) []*spiretypes.Entry {
	out := slices.Clone(entries)
	slices.SortFunc(out, func(a, b *spiretypes.Entry) int {
		return cmp.Or(cmp.Compare(a.GetCreatedAt(), b.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
	})
	return out
}

func sortedKeys[V any](m map[render.Key]V) []render.Key {
	keys := make([]render.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortDeclared(ds []*render.DeclaredEntry) {
	slices.SortFunc(ds, func(a, b *render.DeclaredEntry) int { return cmp.Compare(a.Key, b.Key) })
}
