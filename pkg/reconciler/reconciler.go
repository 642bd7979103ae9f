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

// Package reconciler owns the SPIRE side of the entry controller, as the endpointslice
// controller's reconciler owns the EndpointSlice side: it keeps an in-memory index of the
// entries the controller owns, computes the plan that makes them equal to what is declared,
// and applies it. finalize is the only code that writes to SPIRE.
//
// Two calls use it. Sync reconciles one scope (one pod's entries, or the entries of a few
// keys) against the cache, without reading SPIRE. Resync lists SPIRE in full, merges the list
// into the cache and reconciles everything, scope by scope; syncs go on while it runs, and
// wait only for the scopes it writes.
package reconciler

import (
	"cmp"
	"context"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// Options say which of SPIRE's entries the reconciler owns and whether it only logs.
type Options struct {
	// EntryIDPrefix, when set, names the entries it owns: "<prefix>.<unique>". Other entries
	// are invisible to it.
	EntryIDPrefix string
	// EntryIDPrefixCleanup, when set, names entries to delete at each full resync: those of
	// that prefix, or for "" those whose ID has no dot.
	EntryIDPrefixCleanup *string
	// SkipPodEntries and SkipOtherEntries disown the entries of a kind that is not reconciled:
	// pod entries (ClusterSPIFFEIDs) and entries of no pod (ClusterStaticEntries).
	SkipPodEntries, SkipOtherEntries bool
	// KeepSPIFFEIDs are SPIFFE IDs whose entries are never deleted, even when nothing
	// declares them: the controller's own identity when it reaches SPIRE over mTLS, whose
	// admin entry the operator creates. Deleting it would lock the controller out.
	KeepSPIFFEIDs []string
	// DryRun logs every planned change at the default level. The client is expected to be
	// spire.DryRun, which writes nothing.
	DryRun bool
}

// Reconciler makes SPIRE's entries equal to declared ones.
type Reconciler struct {
	client    spire.EntryClient
	ownership ownership
	dryRun    bool

	cache *entryCache
	// fieldSupport learns which optional entry fields the server keeps.
	fieldSupport *fieldSupport
	// counters are the per-pod outcomes behind ClusterSPIFFEID status. A resync leaves the
	// counters of the pods that syncs wrote while it ran to them.
	counters *StatusCounters

	// scopeLocks serialize the writes of one scope, by a sync or by a resync.
	scopeLocks *scopeLocks
	// epochs tell a resync which scopes syncs finished while it ran.
	epochs *syncEpochs
	// resyncMu lets one resync run at a time. Syncs never take it.
	resyncMu sync.Mutex

	// prefetched is a listing Prefetch started for the next Resync.
	prefetchMu sync.Mutex
	prefetched *prefetchedList
}

// NewReconciler returns a reconciler writing through client. Its cache is empty until the
// first Resync.
func NewReconciler(client spire.EntryClient, opts Options) *Reconciler {
	return &Reconciler{
		client:       client,
		ownership:    newOwnership(opts),
		dryRun:       opts.DryRun,
		cache:        newEntryCache(),
		fieldSupport: &fieldSupport{},
		counters:     NewStatusCounters(),
		scopeLocks:   newScopeLocks(),
		epochs:       newSyncEpochs(),
	}
}

// StatusCounters are the per-pod outcomes the reconciler keeps for ClusterSPIFFEID status.
func (r *Reconciler) StatusCounters() *StatusCounters {
	return r.counters
}

// KeysOfNoPod returns the keys of the cached entries of no pod: static entries, and those
// left over from what static entries declared before.
func (r *Reconciler) KeysOfNoPod() []render.Key {
	return r.cache.keysOfNoPod()
}

// Probe returns nil once SPIRE answers a cheap call.
func (r *Reconciler) Probe(ctx context.Context) error {
	return spire.Probe(ctx, r.client)
}

// Scope is the part of SPIRE one Sync reconciles: the entries of one pod, or the entries of
// no pod that have one of some keys.
type Scope struct {
	podUID         types.UID
	renderFailures []string
	keys           []render.Key
}

// PodScope is the entries of one pod. renderFailures name the ClusterSPIFFEIDs that apply to
// the pod but rendered no entry for it; they count in its status.
func PodScope(uid types.UID, renderFailures ...string) Scope {
	return Scope{podUID: uid, renderFailures: renderFailures}
}

// KeyScope is the entries of no pod that have one of keys.
func KeyScope(keys ...render.Key) Scope {
	return Scope{keys: keys}
}

// scopeKeys returns the scopes a Sync writes.
func (s Scope) scopeKeys() []scopeKey {
	if s.podUID != "" {
		return []scopeKey{podScopeKey(s.podUID)}
	}
	out := make([]scopeKey, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, entryKeyScopeKey(k))
	}
	return out
}

// Result is what a Sync or Resync planned and what of it failed.
type Result struct {
	Plan Plan
	// Failures are the write failures by entry key.
	Failures map[render.Key]error
	// StatusChanged names the ClusterSPIFFEIDs whose status counters changed.
	StatusChanged []string
	// WriteDuration is the time a Sync spent applying its plan to SPIRE.
	WriteDuration time.Duration
}

// Declared is what the whole cluster declares, as a full resync needs it.
type Declared struct {
	Entries []*render.DeclaredEntry
	// RenderFailures name, per pod, the ClusterSPIFFEIDs that apply to it but rendered no
	// entry for it.
	RenderFailures map[types.UID][]string
}

// Sync makes the entries in scope equal to the declared entries in scope; declared entries
// outside it are ignored. It reads the cache, not SPIRE, and never waits for a resync's list
// or declare: only for a sync or resync writing the same scope. The error aggregates every
// failed write, so the caller retries the scope.
func (r *Reconciler) Sync(ctx context.Context, scope Scope, declared []*render.DeclaredEntry) (Result, error) {
	scopes := scope.scopeKeys()
	defer r.scopeLocks.lock(scopes...)()
	epoch := r.epochs.enter()
	defer epoch.leave()

	var current []*spiretypes.Entry
	var inScope []*render.DeclaredEntry
	if scope.podUID != "" {
		current = r.cache.forPod(scope.podUID)
		for _, d := range declared {
			if d.Declarer.PodUID == scope.podUID {
				inScope = append(inScope, d)
			}
		}
	} else {
		for _, k := range scope.keys {
			current = append(current, r.cache.forKey(k)...)
		}
		for _, d := range declared {
			if d.Declarer.PodUID == "" && slices.Contains(scope.keys, d.Key) {
				inScope = append(inScope, d)
			}
		}
	}
	p := reconcile(inScope, current, r.fieldSupport.get())
	writeStart := time.Now()
	failures, err := r.finalize(ctx, p)
	res := Result{Plan: p, Failures: failures, WriteDuration: time.Since(writeStart)}
	// Marked before the counters are recorded: a resync that sees the mark leaves this pod's
	// counters alone, and one that does not has recorded before this sync records.
	epoch.touch(scopes)
	if scope.podUID != "" {
		byPod := outcomes(p, failures, map[types.UID][]string{scope.podUID: scope.renderFailures})
		res.StatusChanged = r.counters.Record(scope.podUID, byPod[scope.podUID])
	}
	return res, err
}

// outcomes returns, per pod, the outcome of every ClusterSPIFFEID that applies to it: a
// render failure, or what became of its entry in the plan (set, failed to write, or masked).
func outcomes(p Plan, failures map[render.Key]error, renderFailures map[types.UID][]string) map[types.UID]PodOutcomes {
	byPod := map[types.UID]PodOutcomes{}
	for uid, names := range renderFailures {
		for _, name := range names {
			if byPod[uid] == nil {
				byPod[uid] = PodOutcomes{}
			}
			byPod[uid][name] = OutcomeRenderFailure
		}
	}
	for d, o := range p.Outcomes(failures) {
		if d.Declarer.Kind != render.KindClusterSPIFFEID {
			continue
		}
		if byPod[d.Declarer.PodUID] == nil {
			byPod[d.Declarer.PodUID] = PodOutcomes{}
		}
		byPod[d.Declarer.PodUID][d.Declarer.Name] = o
	}
	return byPod
}

// Plan is what it takes to make the current entries equal to the declared ones.
type Plan struct {
	// ToCreate are declared entries SPIRE lacks.
	ToCreate []*render.DeclaredEntry
	// ToUpdate are current entries to rewrite, keeping their IDs.
	ToUpdate []*EntryUpdate
	// ToDelete are current entries nobody declares, and duplicates of declared ones.
	ToDelete []*spiretypes.Entry
	// InSync are declared entries SPIRE already holds as declared.
	InSync []*render.DeclaredEntry
	// Masked are declared entries that lose to an older declarer of the same entry.
	Masked []*render.DeclaredEntry
}

// Outcomes yields every declared entry of the plan with what became of it, given the write
// failures of the plan: OutcomeSet when SPIRE holds it as declared, OutcomeEntryFailure when
// its write failed, OutcomeMasked when an older declarer of the same entry wins.
func (p Plan) Outcomes(failures map[render.Key]error) iter.Seq2[*render.DeclaredEntry, Outcome] {
	return func(yield func(*render.DeclaredEntry, Outcome) bool) {
		set := func(d *render.DeclaredEntry) bool {
			if failures[d.Key] != nil {
				return yield(d, OutcomeEntryFailure)
			}
			return yield(d, OutcomeSet)
		}
		for _, d := range p.ToCreate {
			if !set(d) {
				return
			}
		}
		for _, u := range p.ToUpdate {
			if !set(u.Desired) {
				return
			}
		}
		for _, d := range p.InSync {
			if !set(d) {
				return
			}
		}
		for _, d := range p.Masked {
			if !yield(d, OutcomeMasked) {
				return
			}
		}
	}
}

// EntryUpdate rewrites current with desired's fields; the mask says which.
type EntryUpdate struct {
	Current *spiretypes.Entry
	Desired *render.DeclaredEntry
	Mask    *spiretypes.EntryMask
	// Replaces says that Current is an entry of another key, which nothing declares: the
	// update turns it into Desired to keep its ID. Should SPIRE refuse that, Current is
	// deleted all the same.
	Replaces bool
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
func reconcile(declared []*render.DeclaredEntry, current []*spiretypes.Entry, unsupported unsupportedFields) Plan {
	var p Plan

	winners := map[render.Key]*render.DeclaredEntry{}
	for _, d := range declared {
		if w, ok := winners[d.Key]; ok {
			if d.Declarer.Compare(w.Declarer) < 0 {
				winners[d.Key], d = d, w
			}
			p.Masked = append(p.Masked, d)
			continue
		}
		winners[d.Key] = d
	}

	existing := map[render.Key]*spiretypes.Entry{}
	for _, e := range sortedOldestFirst(current) {
		k := render.KeyOf(e)
		if _, ok := existing[k]; ok {
			p.ToDelete = append(p.ToDelete, e)
			continue
		}
		existing[k] = e
	}

	for _, k := range slices.Sorted(maps.Keys(winners)) {
		d := winners[k]
		e, ok := existing[k]
		if !ok {
			p.ToCreate = append(p.ToCreate, d)
			continue
		}
		delete(existing, k)
		if mask := outdatedFields(e, d.Entry, unsupported); mask != nil {
			p.ToUpdate = append(p.ToUpdate, &EntryUpdate{Current: e, Desired: d, Mask: mask})
		} else {
			p.InSync = append(p.InSync, d)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(existing)) {
		p.ToDelete = append(p.ToDelete, existing[k])
	}

	p.pairReplacements(unsupported)
	sortDeclared(p.Masked)
	return p
}

// pairReplacements turns a create and a delete of the same pod into one update of the
// deleted entry, so the pod keeps an entry, and its entry ID, throughout. finalize deletes
// the entry after all if SPIRE refuses the update: an identity nothing declares never
// outlives a refused write.
func (p *Plan) pairReplacements(unsupported unsupportedFields) {
	deletable := map[types.UID][]*spiretypes.Entry{}
	for _, e := range p.ToDelete {
		if uid := render.PodUIDOf(e); uid != "" {
			deletable[uid] = append(deletable[uid], e)
		}
	}
	if len(deletable) == 0 {
		return
	}
	reused := map[string]bool{}
	creates := p.ToCreate[:0]
	for _, d := range p.ToCreate {
		candidates := deletable[d.Declarer.PodUID]
		if d.Declarer.PodUID == "" || len(candidates) == 0 {
			creates = append(creates, d)
			continue
		}
		e := candidates[0]
		deletable[d.Declarer.PodUID] = candidates[1:]
		reused[e.GetId()] = true
		p.ToUpdate = append(p.ToUpdate, &EntryUpdate{Current: e, Desired: d, Mask: replacementMask(e, d.Entry, unsupported), Replaces: true})
	}
	p.ToCreate = creates
	p.ToDelete = slices.DeleteFunc(p.ToDelete, func(e *spiretypes.Entry) bool { return reused[e.GetId()] })
}

// sortedOldestFirst orders entries by creation time, then ID, without touching the input.
func sortedOldestFirst(entries []*spiretypes.Entry) []*spiretypes.Entry {
	out := slices.Clone(entries)
	slices.SortFunc(out, func(a, b *spiretypes.Entry) int {
		return cmp.Or(cmp.Compare(a.GetCreatedAt(), b.GetCreatedAt()), cmp.Compare(a.GetId(), b.GetId()))
	})
	return out
}

func sortDeclared(ds []*render.DeclaredEntry) {
	slices.SortFunc(ds, func(a, b *render.DeclaredEntry) int { return cmp.Compare(a.Key, b.Key) })
}
