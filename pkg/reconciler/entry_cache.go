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
// Entries are indexed by the pod UID they are scoped to, so a pod sync reads its current
// entries without calling SPIRE. Stored entries are never modified; callers must not modify
// what they get.
type entryCache struct {
	mu    sync.RWMutex
	byID  map[string]*spiretypes.Entry
	byPod map[types.UID]map[string]*spiretypes.Entry
	// byKey indexes the entries of no pod (static entries and orphans) by entry key.
	byKey map[render.Key]map[string]*spiretypes.Entry
}

func newEntryCache() *entryCache {
	return &entryCache{
		byID:  map[string]*spiretypes.Entry{},
		byPod: map[types.UID]map[string]*spiretypes.Entry{},
		byKey: map[render.Key]map[string]*spiretypes.Entry{},
	}
}

// replace swaps the whole content for a fresh list.
func (c *entryCache) replace(entries []*spiretypes.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID = make(map[string]*spiretypes.Entry, len(entries))
	c.byPod = make(map[types.UID]map[string]*spiretypes.Entry, len(entries))
	c.byKey = map[render.Key]map[string]*spiretypes.Entry{}
	for _, e := range entries {
		c.putLocked(e)
	}
}

// put stores an entry as SPIRE echoed it, replacing any previous version with its ID.
func (c *entryCache) put(e *spiretypes.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(e.GetId())
	c.putLocked(e)
}

// remove forgets an entry.
func (c *entryCache) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(id)
}

func (c *entryCache) putLocked(e *spiretypes.Entry) {
	c.byID[e.GetId()] = e
	if uid := render.PodUIDOf(e); uid != "" {
		addToIndex(c.byPod, uid, e)
	} else {
		addToIndex(c.byKey, render.KeyOf(e), e)
	}
}

func (c *entryCache) removeLocked(id string) {
	e, ok := c.byID[id]
	if !ok {
		return
	}
	delete(c.byID, id)
	if uid := render.PodUIDOf(e); uid != "" {
		removeFromIndex(c.byPod, uid, id)
	} else {
		removeFromIndex(c.byKey, render.KeyOf(e), id)
	}
}

func addToIndex[K comparable](index map[K]map[string]*spiretypes.Entry, k K, e *spiretypes.Entry) {
	if index[k] == nil {
		index[k] = map[string]*spiretypes.Entry{}
	}
	index[k][e.GetId()] = e
}

func removeFromIndex[K comparable](index map[K]map[string]*spiretypes.Entry, k K, id string) {
	delete(index[k], id)
	if len(index[k]) == 0 {
		delete(index, k)
	}
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

func values(m map[string]*spiretypes.Entry) []*spiretypes.Entry {
	out := make([]*spiretypes.Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	return out
}
