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
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// resyncChunkWrites is about how many writes a resync sends while it holds the locks of the
// scopes they belong to: two of SPIRE's batches. A sync of one of those scopes waits for at
// most that much; a bulk start-up still writes in full batches.
const resyncChunkWrites = 1000

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

// Resync lists every entry of SPIRE, merges the owned ones into the cache and makes them
// equal to what declare returns; it deletes the leftovers of EntryIDPrefixCleanup too.
//
// Syncs go on throughout. The writes they make while SPIRE is listed are journaled by the
// cache and merged with the list, so none is lost or undone. declare runs while SPIRE is
// listed, since listing is mostly waiting for SPIRE and declaring is mostly CPU: at start-up
// with every entry in SPIRE the two overlap instead of adding up. The plan is then made and
// applied scope by scope (a pod, or the key of an entry of no pod), each under the lock a
// Sync of that scope takes, and against the cache as it is then; a scope that a Sync finished
// after declare began is left to that Sync, which wrote with a declaration at least as new. A
// resync that finds nothing to write takes no scope lock. concurrency.go states the rules that
// make this safe.
//
// It fails only when SPIRE cannot be listed or declare fails, and then writes nothing: a
// partial picture must not turn into deletes.
func (r *Reconciler) Resync(ctx context.Context, declare func(context.Context) (Declared, error)) (ResyncResult, error) {
	r.resyncMu.Lock()
	defer r.resyncMu.Unlock()
	start := time.Now()

	// The epoch opens before declare reads anything: a Sync that finishes later may hold a
	// newer declaration than declare's, and its scope is left to it.
	epoch := r.epochs.track()
	defer r.epochs.untrack()
	declareCtx, cancelDeclare := context.WithCancel(ctx)
	defer cancelDeclare()
	declaring := goDeclare(declareCtx, declare)

	l, err := r.listForResync(ctx)
	if err != nil {
		r.cache.abortList()
		cancelDeclare()
		<-declaring
		return ResyncResult{}, fmt.Errorf("listing SPIRE entries: %w", err)
	}
	r.cache.replaceIndexed(l.index, l.interner)
	listed := time.Since(start)
	leftovers, listedCount, ownedCount := l.leftovers, l.listed, l.owned

	d := <-declaring
	if d.err != nil {
		return ResyncResult{}, d.err
	}
	declared := d.declared

	run := &resyncRun{r: r, epoch: epoch, declared: map[scopeKey][]*render.DeclaredEntry{}, failures: map[render.Key]error{}}
	for _, d := range declared.Entries {
		k := scopeOf(d)
		run.declared[k] = append(run.declared[k], d)
	}
	pending := run.planUnlocked()
	run.apply(ctx, pending)
	if len(leftovers) > 0 {
		// Entries of a former owner: no sync sees them, so no scope lock guards them.
		run.finalize(ctx, Plan{ToDelete: leftovers})
	}
	sortDeclared(run.plan.Masked)

	p := run.plan
	klog.FromContext(ctx).V(2).Info("Full resync done", "duration", time.Since(start), "listing", listed,
		"entries", listedCount, "owned", ownedCount, "declared", len(declared.Entries), "created", len(p.ToCreate),
		"updated", len(p.ToUpdate), "deleted", len(p.ToDelete), "masked", len(p.Masked),
		"scopesToWrite", len(pending), "scopesLeftToSyncs", run.skipped)

	writeErr := utilerrors.NewAggregate(run.errs)
	res := ResyncResult{Result: Result{Plan: p, Failures: run.failures}, WriteErr: writeErr}
	res.StatusChanged = r.counters.replaceAllExcept(outcomes(p, run.failures, declared.RenderFailures),
		func(uid types.UID) bool { return epoch.touchedScope(podScopeKey(uid)) })
	if writeErr != nil {
		res.RetryPods, res.RetryNames = r.retries(p, run.failures)
	}
	return res, nil
}

// declaration is what a declare function returned.
type declaration struct {
	declared Declared
	err      error
}

// goDeclare runs declare in a goroutine of its own; its one result arrives on the channel.
func goDeclare(ctx context.Context, declare func(context.Context) (Declared, error)) <-chan declaration {
	out := make(chan declaration, 1)
	go func() {
		d, err := declare(ctx)
		out <- declaration{d, err}
	}()
	return out
}

// resyncRun is the state of one resync's planning and writing.
type resyncRun struct {
	r        *Reconciler
	epoch    *syncEpoch
	declared map[scopeKey][]*render.DeclaredEntry

	// plan is what the resync found in sync and what it wrote, over every scope it acted on.
	plan     Plan
	failures map[render.Key]error
	errs     []error
	// skipped counts the scopes left to syncs that wrote them meanwhile.
	skipped int
}

// planUnlocked plans every scope, declared or cached, against the cache without locking it,
// keeps the outcome of those with nothing to write, and returns the others, with how many
// writes each needs. Steady state writes nothing, so it takes no scope lock at all.
func (run *resyncRun) planUnlocked() []scopeWrites {
	unsupported := run.r.fieldSupport.get()
	var pending []scopeWrites
	visit := func(k scopeKey) {
		p := reconcile(run.declared[k], run.r.current(k), unsupported)
		if n := p.writes(); n > 0 {
			pending = append(pending, scopeWrites{scope: k, writes: n})
			return
		}
		run.plan.InSync = append(run.plan.InSync, p.InSync...)
		run.plan.Masked = append(run.plan.Masked, p.Masked...)
	}
	for k := range run.declared {
		visit(k)
	}
	pods, keys := run.r.cache.scopes()
	for _, uid := range pods {
		if k := podScopeKey(uid); run.declared[k] == nil {
			visit(k)
		}
	}
	for _, key := range keys {
		if k := entryKeyScopeKey(key); run.declared[k] == nil {
			visit(k)
		}
	}
	return pending
}

// scopeWrites is a scope that needs writing, and how many writes it needed when planned.
type scopeWrites struct {
	scope  scopeKey
	writes int
}

// apply writes the scopes in chunks of about resyncChunkWrites writes. Scopes are ordered by
// lock stripe, so that a chunk holds few stripes.
func (run *resyncRun) apply(ctx context.Context, pending []scopeWrites) {
	locks := run.r.scopeLocks
	stripes := make(map[scopeKey]int, len(pending))
	for _, s := range pending {
		stripes[s.scope] = locks.stripe(s.scope)
	}
	slices.SortFunc(pending, func(a, b scopeWrites) int {
		return cmp.Or(cmp.Compare(stripes[a.scope], stripes[b.scope]), cmp.Compare(a.scope.String(), b.scope.String()))
	})
	for lo := 0; lo < len(pending); {
		hi, writes := lo, 0
		for hi < len(pending) && (hi == lo || writes+pending[hi].writes <= resyncChunkWrites) {
			writes += pending[hi].writes
			hi++
		}
		chunk := make([]scopeKey, 0, hi-lo)
		for _, s := range pending[lo:hi] {
			chunk = append(chunk, s.scope)
		}
		run.applyChunk(ctx, chunk)
		lo = hi
	}
}

// applyChunk plans the scopes again against the cache under their locks, skipping those a
// sync finished meanwhile, and writes their plans together.
func (run *resyncRun) applyChunk(ctx context.Context, chunk []scopeKey) {
	defer run.r.scopeLocks.lock(chunk...)()
	unsupported := run.r.fieldSupport.get()
	var p Plan
	for _, k := range chunk {
		if run.epoch.touchedScope(k) {
			run.skipped++
			continue
		}
		p.add(reconcile(run.declared[k], run.r.current(k), unsupported))
	}
	run.finalize(ctx, p)
}

func (run *resyncRun) finalize(ctx context.Context, p Plan) {
	if p.writes() == 0 {
		run.plan.add(p)
		return
	}
	failures, err := run.r.finalize(ctx, p)
	run.plan.add(p)
	for k, err := range failures {
		run.failures[k] = err
	}
	if err != nil {
		run.errs = append(run.errs, err)
	}
}

// current returns the cached entries of a scope.
func (r *Reconciler) current(k scopeKey) []*spiretypes.Entry {
	if k.pod != "" {
		return r.cache.forPod(k.pod)
	}
	return r.cache.forKey(k.key)
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
