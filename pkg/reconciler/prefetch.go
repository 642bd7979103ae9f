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
)

// prefetchedList is a SPIRE listing started before the Resync that uses it.
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
