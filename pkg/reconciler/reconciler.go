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
// wait only for the scopes it writes. concurrency.go states how, as rules to keep.
package reconciler

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

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
	// SkipClusterSPIFFEIDs and SkipClusterStaticEntries turn a kind off (the config's
	// reconcile.clusterSPIFFEIDs and reconcile.clusterStaticEntries): its resources declare
	// nothing, and the entries it would own, pod entries and entries of no pod, are left
	// alone rather than deleted.
	SkipClusterSPIFFEIDs, SkipClusterStaticEntries bool
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

// WatchSPIRE calls reconnected each time the client's connection to SPIRE is ready again
// after it was lost, until ctx ends (see spire.WatchReconnects); it returns at once when the
// client cannot tell.
func (r *Reconciler) WatchSPIRE(ctx context.Context, reconnected func()) {
	spire.WatchReconnects(ctx, r.client, reconnected)
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

// finalize is the only function that writes to SPIRE. It applies a plan — creates and updates
// before deletes, so a pod whose entry changes is never left without one — and keeps the entry
// cache equal to what SPIRE answered. It fails closed: an update that fails leaves behind an
// entry that grants what nothing declares (the entry of another identity it was to replace,
// or an admin, downstream, federatesWith or DNS name no longer declared), and that entry is
// deleted with the rest. It returns the write failures by entry key; the error aggregates
// every failure so the key is retried.
func (r *Reconciler) finalize(ctx context.Context, p Plan) (map[render.Key]error, error) {
	logPlan(ctx, p, r.dryRun)
	w := &planWriter{cache: r.cache, client: r.client, ownership: r.ownership, support: r.fieldSupport,
		logger: klog.FromContext(ctx), failures: map[render.Key]error{}}
	w.create(ctx, p.ToCreate)
	w.update(ctx, p.ToUpdate)
	w.delete(ctx, append(p.ToDelete, w.revoke...))
	if p.writes() > 0 {
		klog.FromContext(ctx).V(2).Info("Applied entry plan",
			"created", len(p.ToCreate), "updated", len(p.ToUpdate), "deleted", len(p.ToDelete), "errors", len(w.errs))
	}
	return w.failures, utilerrors.NewAggregate(w.errs)
}

// planWriter collects the results of one plan's writes.
type planWriter struct {
	cache     *entryCache
	client    spire.EntryClient
	ownership ownership
	support   *fieldSupport
	logger    klog.Logger
	failures  map[render.Key]error
	errs      []error
	// revoke are the current entries of failed updates that grant more than is declared.
	revoke []*spiretypes.Entry
}

func (w *planWriter) fail(key render.Key, err error) {
	if key != "" {
		w.failures[key] = err
	}
	w.errs = append(w.errs, err)
}

func (w *planWriter) create(ctx context.Context, ds []*render.DeclaredEntry) {
	if len(ds) == 0 {
		return
	}
	entries := make([]*spiretypes.Entry, len(ds))
	for i, d := range ds {
		entries[i] = d.Entry
		if id := w.ownership.newID(); id != "" {
			entries[i] = cloneEntry(d.Entry)
			entries[i].Id = id
		}
	}
	results, err := w.client.CreateEntries(ctx, entries)
	results = spire.CompleteEntryResults(results, len(entries), err)
	for i, d := range ds {
		r := results[i]
		switch {
		case r.Err == nil:
			w.support.learn(w.logger, entries[i], r.Entry)
			w.cache.put(r.Entry)
		case spire.IsAlreadyExists(r.Err) && r.Entry != nil && !w.ownership.owns(r.Entry):
			// Another owner (another prefix, or an operator) holds the same entry; SPIRE allows
			// one, so this declaration cannot be written. It is reported, never taken over.
			w.fail(d.Key, fmt.Errorf("creating entry %s: SPIRE already holds it as %s, which this controller does not own",
				render.SPIFFEIDString(d.Entry.GetSpiffeId()), r.Entry.GetId()))
		case spire.IsAlreadyExists(r.Err) && r.Entry != nil:
			// SPIRE holds this entry but the cache did not: adopt it, and sync the key again
			// so that its fields are compared with what is declared.
			w.cache.put(r.Entry)
			w.errs = append(w.errs, fmt.Errorf("entry %s already existed as %s; syncing again", render.SPIFFEIDString(d.Entry.GetSpiffeId()), r.Entry.GetId()))
		default:
			w.fail(d.Key, fmt.Errorf("creating entry %s: %w", render.SPIFFEIDString(d.Entry.GetSpiffeId()), r.Err))
		}
	}
}

// update sends one batch per distinct mask, since SPIRE takes a single mask per batch.
func (w *planWriter) update(ctx context.Context, us []*EntryUpdate) {
	byMask := map[uint64][]*EntryUpdate{}
	var order []uint64
	for _, u := range us {
		k := maskKey(u.Mask)
		if _, ok := byMask[k]; !ok {
			order = append(order, k)
		}
		byMask[k] = append(byMask[k], u)
	}
	for _, k := range order {
		group := byMask[k]
		entries := make([]*spiretypes.Entry, len(group))
		for i, u := range group {
			e := cloneEntry(u.Desired.Entry)
			e.Id = u.Current.GetId()
			entries[i] = e
		}
		results, err := w.client.UpdateEntries(ctx, entries, group[0].Mask)
		results = spire.CompleteEntryResults(results, len(entries), err)
		for i, u := range group {
			r := results[i]
			switch {
			case r.Err == nil:
				w.support.learn(w.logger, entries[i], r.Entry)
				w.cache.put(r.Entry)
			case spire.IsNotFound(r.Err):
				// Deleted behind our back: forget it, and the retry creates it anew.
				w.cache.remove(u.Current.GetId())
				w.fail(u.Desired.Key, fmt.Errorf("updating entry %s: it no longer exists; syncing again", u.Current.GetId()))
			default:
				w.failUpdate(u, fmt.Errorf("updating entry %s: %w", u.Current.GetId(), r.Err))
			}
		}
	}
}

// failUpdate records a failed update, and revokes the entry it left if that grants more than
// is declared. The declared entry is then reported as failed, as a refused create is.
func (w *planWriter) failUpdate(u *EntryUpdate, err error) {
	w.fail(u.Desired.Key, err)
	if u.Replaces || grantsBeyond(u.Current, u.Desired.Entry) {
		w.logger.Info("Deleting an entry whose update failed: it grants what is no longer declared",
			"entryID", u.Current.GetId(), "spiffeID", render.SPIFFEIDString(u.Current.GetSpiffeId()),
			"declared", render.SPIFFEIDString(u.Desired.Entry.GetSpiffeId()), "err", err)
		w.revoke = append(w.revoke, u.Current)
	}
}

func (w *planWriter) delete(ctx context.Context, entries []*spiretypes.Entry) {
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if w.ownership.keeps(e) {
			w.logger.V(4).Info("Keeping the entry of spire-registrar's own identity", "entryID", e.GetId())
			continue
		}
		ids = append(ids, e.GetId())
	}
	if len(ids) == 0 {
		return
	}
	results, err := w.client.DeleteEntries(ctx, ids)
	results = spire.CompleteDeleteResults(results, ids, err)
	for i, id := range ids {
		if r := results[i]; r.Err != nil && !spire.IsNotFound(r.Err) {
			w.fail("", fmt.Errorf("deleting entry %s: %w", id, r.Err))
			continue
		}
		w.cache.remove(id)
	}
}
