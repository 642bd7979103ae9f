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

import "sync"

// syncEpochs tell a resync which syncs ran alongside it. Every sync runs in the epoch current
// when it starts. A resync opens a tracking epoch once its list is merged into the cache, and
// waits for the syncs of the previous epoch to end, so that every write made from a cache
// older than the merge is in the cache before it plans. The syncs of the tracking epoch read
// the merged cache; each marks the scopes it finished, and the resync leaves those scopes, and
// their status counters, to them.
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
