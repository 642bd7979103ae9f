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
	"context"
	"hash/maphash"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// This file holds the reconciler's concurrency: what lets many Syncs and one Resync write
// SPIRE at once without losing, undoing or reordering a write. Its parts are scope locks,
// the cache's journal (entry_cache.go), sync epochs and the prefetched listing.
//
// Actors. Sync reconciles one scope (a pod's entries, or the entries of no pod of some keys)
// against the cache; the controller's workers run many at once. Resync lists SPIRE, merges
// the list into the cache and reconciles every scope; resyncMu lets one run at a time, and no
// Sync ever takes it. Prefetch starts the listing of the next Resync early.
//
// The rules a change here must keep true:
//
//  1. Scope locks. Every write of a scope's entries, and the cache read it was planned from,
//     happen under that scope's lock. Sync holds it from reading the cache to recording the
//     echoes of its writes. Resync plans every scope unlocked first (steady state writes
//     nothing and takes no lock), then plans again and writes the scopes that need it, a
//     chunk of about resyncChunkWrites writes at a time, under the chunk's locks. So a Sync
//     waits for at most one chunk, never for a list or a declare. Locks are taken in stripe
//     order (scopeLocks.lock), and never while holding the cache's mutex. The leftovers of a
//     former owner (EntryIDPrefixCleanup) are the one write with no scope lock: no Sync sees
//     them.
//
//  2. The journal. Between beginList (at Prefetch, or when Resync lists) and replaceIndexed
//     (or abortList on a failed list), the cache journals every put and remove. The list
//     replaces the cache's content only merged with the journal: a journaled remove wins, and
//     where both hold an entry the higher revision wins, the journal on a tie. A write made
//     while SPIRE was listed is neither lost (the list missed it) nor undone (the list saw
//     what it replaced).
//
//  3. Sync epochs. A Sync enters the current epoch under its scope lock and leaves it when it
//     returns. Resync opens a tracking epoch before declare reads anything, and waits until
//     every Sync of the previous epoch has left: their writes are then in the cache, or in
//     the journal of a list that has not begun merging. A Sync of the tracking epoch marks
//     its scopes touched after its writes and before it records its status counters. Resync
//     checks the mark under the scope's lock and leaves a touched scope, and that pod's
//     counters, to the Sync, which wrote after the resync began: a declaration newer than the
//     one it wrote has queued another Sync of the scope (the controller's part of the bargain:
//     every change to what a scope declares queues a Sync of it), and a change made behind
//     the controller's back in that scope waits for the next resync. After the Resync,
//     untrack opens a plain epoch that marks nothing.
//
//  4. Prefetch. Prefetch begins the journal and starts one listing, at most one at a time
//     (prefetchMu); the next Resync takes it instead of listing, and a failed one aborts the
//     journal as a failed list does. A controller prefetches before its informers sync, so
//     that SPIRE's list and theirs overlap.
//
// A failed list or declare writes nothing: a partial picture must not turn into deletes.

// scopeKey names the smallest unit the reconciler writes alone: one pod's entries (pod set),
// or the entries of no pod that have one key (key set).
type scopeKey struct {
	pod types.UID
	key render.Key
}

func podScopeKey(uid types.UID) scopeKey { return scopeKey{pod: uid} }

func entryKeyScopeKey(k render.Key) scopeKey { return scopeKey{key: k} }

// scopeOf returns the scope a declared entry is synced in: its pod's, or its key's.
func scopeOf(d *render.DeclaredEntry) scopeKey {
	if d.Declarer.PodUID != "" {
		return podScopeKey(d.Declarer.PodUID)
	}
	return entryKeyScopeKey(d.Key)
}

func (k scopeKey) String() string {
	if k.pod != "" {
		return "pod/" + string(k.pod)
	}
	return "key/" + string(k.key)
}

// scopeLockStripes is how many mutexes the scopes share. Enough that a resync writing one
// chunk of scopes rarely holds the stripe of the pod a sync waits for.
const scopeLockStripes = 1024

// scopeLocks serialize the writes of one scope (rule 1 above). Scopes share striped mutexes,
// so memory does not grow with the number of pods.
type scopeLocks struct {
	seed    maphash.Seed
	stripes [scopeLockStripes]sync.Mutex
}

func newScopeLocks() *scopeLocks {
	return &scopeLocks{seed: maphash.MakeSeed()}
}

// stripe returns the index of a scope's mutex.
func (l *scopeLocks) stripe(k scopeKey) int {
	return int(maphash.Comparable(l.seed, k) % scopeLockStripes)
}

// lock takes the mutexes of scopes, in stripe order so that no two callers deadlock, and
// returns the function that releases them.
func (l *scopeLocks) lock(scopes ...scopeKey) (unlock func()) {
	stripes := make([]int, 0, len(scopes))
	for _, k := range scopes {
		stripes = append(stripes, l.stripe(k))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, s := range stripes {
		l.stripes[s].Lock()
	}
	return func() {
		for _, s := range slices.Backward(stripes) {
			l.stripes[s].Unlock()
		}
	}
}

// syncEpochs tell a resync which syncs ran alongside it (rule 3 above).
type syncEpochs struct {
	mu      sync.Mutex
	current *syncEpoch
}

type syncEpoch struct {
	inflight sync.WaitGroup
	// tracking is set for the epoch of a resync; other epochs mark nothing.
	tracking bool
	mu       sync.Mutex
	touched  map[scopeKey]struct{}
}

func newSyncEpochs() *syncEpochs {
	return &syncEpochs{current: &syncEpoch{}}
}

// enter registers a sync in the current epoch; the sync calls leave on the epoch when done.
func (s *syncEpochs) enter() *syncEpoch {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current.inflight.Add(1)
	return s.current
}

// track opens a tracking epoch and returns it once every sync of the previous epoch ended.
func (s *syncEpochs) track() *syncEpoch {
	next := &syncEpoch{tracking: true, touched: map[scopeKey]struct{}{}}
	s.mu.Lock()
	prev := s.current
	s.current = next
	s.mu.Unlock()
	prev.inflight.Wait()
	return next
}

// untrack ends the tracking: later syncs mark nothing.
func (s *syncEpochs) untrack() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = &syncEpoch{}
}

func (e *syncEpoch) leave() {
	e.inflight.Done()
}

// touch marks scopes as written by a sync of this epoch.
func (e *syncEpoch) touch(scopes []scopeKey) {
	if !e.tracking {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range scopes {
		e.touched[k] = struct{}{}
	}
}

// touchedScope reports whether a sync of this epoch finished with a scope.
func (e *syncEpoch) touchedScope(k scopeKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.touched[k]
	return ok
}

// prefetchedList is a SPIRE listing started before the Resync that uses it (rule 4 above).
type prefetchedList struct {
	done    chan struct{}
	listing *listing
	err     error
}

// Prefetch starts listing SPIRE for the next Resync, which then waits for that listing
// instead of starting its own. A controller calls it before it waits for its informers, so
// that at start-up SPIRE's list and the informers' initial lists overlap instead of adding
// up. Writes made meanwhile are journaled and merged as for any resync's list. A second call
// before that Resync does nothing.
func (r *Reconciler) Prefetch(ctx context.Context) {
	r.prefetchMu.Lock()
	defer r.prefetchMu.Unlock()
	if r.prefetched != nil {
		return
	}
	p := &prefetchedList{done: make(chan struct{})}
	r.cache.beginList()
	go func() {
		defer close(p.done)
		p.listing, p.err = r.list(ctx, r.cache.size())
	}()
	r.prefetched = p
}

// listForResync returns the prefetched listing if there is one, else lists SPIRE now. The
// cache journals the writes made from the listing's start.
func (r *Reconciler) listForResync(ctx context.Context) (*listing, error) {
	r.prefetchMu.Lock()
	p := r.prefetched
	r.prefetched = nil
	r.prefetchMu.Unlock()
	if p == nil {
		r.cache.beginList()
		return r.list(ctx, r.cache.size())
	}
	select {
	case <-p.done:
		return p.listing, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
