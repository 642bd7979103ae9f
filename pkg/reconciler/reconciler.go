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
// keys) against the cache, without reading SPIRE. Resync lists SPIRE in full, replaces the
// cache and reconciles everything; it excludes every Sync while it runs.
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
	// SkipPodEntries and SkipOtherEntries disown the entries of a kind that is not reconciled:
	// pod entries (ClusterSPIFFEIDs) and entries of no pod (ClusterStaticEntries).
	SkipPodEntries, SkipOtherEntries bool
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
	// counters are the per-pod outcomes behind ClusterSPIFFEID status. They change under the
	// same lock as the cache, so a resync's outcomes never overwrite a newer sync's.
	counters *StatusCounters

	// resyncLock lets syncs run concurrently (read) but never alongside a full resync
	// (write), which replaces the entry cache under them.
	resyncLock sync.RWMutex
}

// NewReconciler returns a reconciler writing through client. Its cache is empty until the
// first Resync.
func NewReconciler(client spire.EntryClient, opts Options) *Reconciler {
	return &Reconciler{
		client: client,
		ownership: ownership{prefix: opts.EntryIDPrefix, cleanup: opts.EntryIDPrefixCleanup,
			skipPodEntries: opts.SkipPodEntries, skipOtherEntries: opts.SkipOtherEntries},
		dryRun:       opts.DryRun,
		cache:        newEntryCache(),
		fieldSupport: &fieldSupport{},
		counters:     NewStatusCounters(),
	}
}

// StatusCounters are the per-pod outcomes the reconciler keeps for ClusterSPIFFEID status.
func (r *Reconciler) StatusCounters() *StatusCounters {
	return r.counters
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
// outside it are ignored. It reads the cache, not SPIRE. The error aggregates every failed
// write, so the caller retries the scope.
func (r *Reconciler) Sync(ctx context.Context, scope Scope, declared []*render.DeclaredEntry) (Result, error) {
	r.resyncLock.RLock()
	defer r.resyncLock.RUnlock()

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
	if scope.podUID != "" {
		byPod := outcomes(p, failures, map[types.UID][]string{scope.podUID: scope.renderFailures})
		res.StatusChanged = r.counters.Record(scope.podUID, byPod[scope.podUID])
	}
	return res, err
}

// ResyncResult is what a full resync did, and what the caller should retry on its own.
type ResyncResult struct {
	Result
	// RetryPods and RetryNames are the pods, and the declarers of entries of no pod, whose
	// writes failed. Other leftovers wait for the next resync, the only path that deletes
	// them.
	RetryPods  []types.UID
	RetryNames []string
	// WriteErr aggregates the failed writes. They do not fail the resync: the picture it
	// acted on was complete.
	WriteErr error
}

// Resync lists every entry of SPIRE, replaces the cache with the owned ones and makes them
// equal to what declare returns; it deletes the leftovers of EntryIDPrefixCleanup too. declare
// runs once SPIRE is listed, with every Sync excluded, so that nothing is written between what
// it declares and what the plan acts on.
//
// It fails only when SPIRE cannot be listed or declare fails, and then writes nothing: a
// partial picture must not turn into deletes.
func (r *Reconciler) Resync(ctx context.Context, declare func(context.Context) (Declared, error)) (ResyncResult, error) {
	r.resyncLock.Lock()
	defer r.resyncLock.Unlock()
	start := time.Now()

	all, err := r.client.ListEntries(ctx)
	if err != nil {
		return ResyncResult{}, fmt.Errorf("listing SPIRE entries: %w", err)
	}
	owned := make([]*spiretypes.Entry, 0, len(all))
	var leftovers []*spiretypes.Entry
	for _, e := range all {
		switch {
		case r.ownership.owns(e):
			owned = append(owned, e)
		case r.ownership.deleteOnly(e):
			leftovers = append(leftovers, e)
		}
	}
	r.cache.replace(owned)

	declared, err := declare(ctx)
	if err != nil {
		return ResyncResult{}, err
	}
	p := reconcile(declared.Entries, owned, r.fieldSupport.get())
	p.ToDelete = append(p.ToDelete, leftovers...)
	failures, writeErr := r.finalize(ctx, p)
	klog.FromContext(ctx).V(2).Info("Full resync done", "duration", time.Since(start), "entries", len(all), "owned", len(owned),
		"declared", len(declared.Entries), "created", len(p.ToCreate), "updated", len(p.ToUpdate), "deleted", len(p.ToDelete),
		"masked", len(p.Masked))

	res := ResyncResult{Result: Result{Plan: p, Failures: failures}, WriteErr: writeErr}
	res.StatusChanged = r.counters.ReplaceAll(outcomes(p, failures, declared.RenderFailures))
	if writeErr != nil {
		res.RetryPods, res.RetryNames = r.retries(p, failures)
	}
	return res, nil
}

// retries returns the pods and the declarers of entries of no pod whose writes failed.
func (r *Reconciler) retries(p Plan, failures map[render.Key]error) ([]types.UID, []string) {
	var pods []types.UID
	var names []string
	retry := func(d *render.DeclaredEntry) {
		if failures[d.Key] == nil {
			return
		}
		if d.Declarer.PodUID != "" {
			pods = append(pods, d.Declarer.PodUID)
		} else {
			names = append(names, d.Declarer.Name)
		}
	}
	for _, d := range p.ToCreate {
		retry(d)
	}
	for _, u := range p.ToUpdate {
		retry(u.Desired)
	}
	// A pod entry whose delete failed is still cached; the pod's sync deletes it again.
	for _, e := range p.ToDelete {
		if uid := render.PodUIDOf(e); uid != "" && len(r.cache.forPod(uid)) > 0 {
			pods = append(pods, uid)
		}
	}
	return pods, names
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
	set := func(d *render.DeclaredEntry, o Outcome) {
		if d.Declarer.Kind != render.KindClusterSPIFFEID {
			return
		}
		if o == OutcomeSet && failures[d.Key] != nil {
			o = OutcomeEntryFailure
		}
		if byPod[d.Declarer.PodUID] == nil {
			byPod[d.Declarer.PodUID] = PodOutcomes{}
		}
		byPod[d.Declarer.PodUID][d.Declarer.Name] = o
	}
	for _, d := range p.ToCreate {
		set(d, OutcomeSet)
	}
	for _, u := range p.ToUpdate {
		set(u.Desired, OutcomeSet)
	}
	for _, d := range p.InSync {
		set(d, OutcomeSet)
	}
	for _, d := range p.Masked {
		set(d, OutcomeMasked)
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

// EntryUpdate rewrites current with desired's fields; the mask says which.
type EntryUpdate struct {
	Current *spiretypes.Entry
	Desired *render.DeclaredEntry
	Mask    *spiretypes.EntryMask
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
// deleted entry, so the pod keeps an entry, and its entry ID, throughout.
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
		p.ToUpdate = append(p.ToUpdate, &EntryUpdate{Current: e, Desired: d, Mask: replacementMask(e, d.Entry, unsupported)})
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
