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
	"sync"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"
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
}

func newEntryCache() *entryCache {
	return &entryCache{byID: map[string]*spiretypes.Entry{}, byPod: map[types.UID]map[string]*spiretypes.Entry{}}
}

// replace swaps the whole content for a fresh list.
func (c *entryCache) replace(entries []*spiretypes.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID = make(map[string]*spiretypes.Entry, len(entries))
	c.byPod = make(map[types.UID]map[string]*spiretypes.Entry, len(entries))
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
	if uid := podUIDOf(e); uid != "" {
		if c.byPod[uid] == nil {
			c.byPod[uid] = map[string]*spiretypes.Entry{}
		}
		c.byPod[uid][e.GetId()] = e
	}
}

func (c *entryCache) removeLocked(id string) {
	e, ok := c.byID[id]
	if !ok {
		return
	}
	delete(c.byID, id)
	if uid := podUIDOf(e); uid != "" {
		delete(c.byPod[uid], id)
		if len(c.byPod[uid]) == 0 {
			delete(c.byPod, uid)
		}
	}
}

// forPod returns the entries scoped to a pod.
func (c *entryCache) forPod(uid types.UID) []*spiretypes.Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*spiretypes.Entry, 0, len(c.byPod[uid]))
	for _, e := range c.byPod[uid] {
		out = append(out, e)
	}
	return out
}

// podUIDs returns every pod UID that has entries.
func (c *entryCache) podUIDs() []types.UID {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]types.UID, 0, len(c.byPod))
	for uid := range c.byPod {
		out = append(out, uid)
	}
	return out
}

// len returns the number of cached entries.
func (c *entryCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byID)
}
