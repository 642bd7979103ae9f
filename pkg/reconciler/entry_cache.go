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
	"maps"
	"slices"
	"sync"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// entryCache is the controller's view of the entries it owns in SPIRE. SPIRE has no watch, so
// it plays the role an informer plays for Kubernetes objects: it is filled by a full list,
// kept current by the results of the controller's own writes, and replaced by every resync,
// which is what repairs changes made behind the controller's back.
//
// A resync lists SPIRE without stopping the writes of syncs. While its list is in flight the
// cache journals every put and remove, and the listed entries replace the content only merged
// with that journal (see replaceIndexed), so a write the list missed is not lost and one it
// saw before a later remove does not come back.
//
// Entries are indexed by the pod UID they are scoped to, so a pod sync reads its current
// entries without calling SPIRE. They are kept compact (cachedEntry) and handed out as new
// messages, whose parent IDs and selectors are shared and must not be modified.
type entryCache struct {
	mu sync.RWMutex
	entryIndex
	// interner shares what entries repeat. Each list starts a new one, so what no entry uses
	// any more goes with the next resync.
	interner *interner
	// journal holds, while a list is in flight, the last write of every entry ID since the list
	// began: the entry as SPIRE echoed it, or nil for a remove. It is nil otherwise.
	journal map[string]*cachedEntry
}

// entryIndex holds entries by ID, by pod and by key. A pod has about one entry per
// ClusterSPIFFEID and a key one entry, so slices serve those indexes in a fraction of the
// memory maps take.
type entryIndex struct {
	byID  map[string]*cachedEntry
	byPod map[types.UID][]*cachedEntry
	// byKey indexes the entries of no pod (static entries and orphans) by entry key.
	byKey map[render.Key][]*cachedEntry
}

func newEntryCache() *entryCache {
	return &entryCache{entryIndex: newEntryIndex(0), interner: newInterner()}
}

func newEntryIndex(size int) entryIndex {
	return entryIndex{
		byID:  make(map[string]*cachedEntry, size),
		byPod: make(map[types.UID][]*cachedEntry, size/4),
		byKey: map[render.Key][]*cachedEntry{},
	}
}

// beginList starts journaling writes for a list that is about to be made.
func (c *entryCache) beginList() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.journal = map[string]*cachedEntry{}
}

// abortList stops journaling and keeps the content: the list failed.
func (c *entryCache) abortList() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.journal = nil
}

// replaceIndexed swaps the content for the entries a list returned, already indexed and
// compacted by in, merged with the writes journaled since beginList: a journaled remove wins,
// and where the list and the journal both hold an entry the higher revision wins (the journal
// on a tie, being the later echo). The caller indexes the listed entries outside the lock, so
// syncs wait only for the merge.
func (c *entryCache) replaceIndexed(idx entryIndex, in *interner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, written := range c.journal {
		if written != nil {
			if seen := idx.byID[id]; seen != nil && seen.revision > written.revision {
				continue
			}
			// Interned at its put by the previous interner, whose parts it keeps.
			idx.remove(id)
			idx.put(written)
			continue
		}
		idx.remove(id)
	}
	c.entryIndex, c.interner = idx, in
	c.journal = nil
}

// size is how many entries the cache holds.
func (c *entryCache) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byID)
}

// put stores an entry as SPIRE echoed it, replacing any previous version with its ID.
func (c *entryCache) put(e *spiretypes.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ce := compactEntry(e, c.interner)
	c.entryIndex.remove(ce.id)
	c.entryIndex.put(ce)
	if c.journal != nil {
		c.journal[ce.id] = ce
	}
}

// remove forgets an entry.
func (c *entryCache) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entryIndex.remove(id)
	if c.journal != nil {
		c.journal[id] = nil
	}
}

// put adds an entry whose ID the index does not hold.
func (x entryIndex) put(ce *cachedEntry) {
	x.byID[ce.id] = ce
	e := ce.entry()
	if uid := render.PodUIDOf(e); uid != "" {
		addToIndex(x.byPod, uid, ce)
	} else {
		addToIndex(x.byKey, render.KeyOf(e), ce)
	}
}

func (x entryIndex) remove(id string) {
	ce, ok := x.byID[id]
	if !ok {
		return
	}
	delete(x.byID, id)
	e := ce.entry()
	if uid := render.PodUIDOf(e); uid != "" {
		removeFromIndex(x.byPod, uid, id)
	} else {
		removeFromIndex(x.byKey, render.KeyOf(e), id)
	}
}

func addToIndex[K comparable](index map[K][]*cachedEntry, k K, ce *cachedEntry) {
	index[k] = append(index[k], ce)
}

// removeFromIndex drops an entry in place: the slices never leave the cache's lock.
func removeFromIndex[K comparable](index map[K][]*cachedEntry, k K, id string) {
	entries := slices.DeleteFunc(index[k], func(ce *cachedEntry) bool { return ce.id == id })
	if len(entries) == 0 {
		delete(index, k)
		return
	}
	index[k] = entries
}

// forPod returns the entries scoped to a pod.
func (c *entryCache) forPod(uid types.UID) []*spiretypes.Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return values(c.byPod[uid])
}

// forKey returns the entries of no pod that have a key.
func (c *entryCache) forKey(k render.Key) []*spiretypes.Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return values(c.byKey[k])
}

// keysOfNoPod returns the keys of the entries of no pod.
func (c *entryCache) keysOfNoPod() []render.Key {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Collect(maps.Keys(c.byKey))
}

// scopes returns the pods and the keys of no pod that the cache holds entries for.
func (c *entryCache) scopes() ([]types.UID, []render.Key) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	pods := make([]types.UID, 0, len(c.byPod))
	for uid := range c.byPod {
		pods = append(pods, uid)
	}
	keys := make([]render.Key, 0, len(c.byKey))
	for k := range c.byKey {
		keys = append(keys, k)
	}
	return pods, keys
}

// values returns an index's entries as new messages.
func values(cached []*cachedEntry) []*spiretypes.Entry {
	out := make([]*spiretypes.Entry, len(cached))
	for i, ce := range cached {
		out[i] = ce.entry()
	}
	return out
}
