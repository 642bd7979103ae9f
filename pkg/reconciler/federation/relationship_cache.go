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

package federation

import (
	"sync"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// relationshipCache is the controller's view of SPIRE's federation relationships, by trust
// domain name. SPIRE has no watch, so it plays the role an informer plays for Kubernetes
// objects: it is filled by a full list, kept current by the results of the controller's own
// writes, and replaced by every resync, which is what repairs changes made behind the
// controller's back. Stored relationships are never modified; callers must not modify what
// they get.
type relationshipCache struct {
	mu   sync.RWMutex
	byTD map[string]*spiretypes.FederationRelationship
}

func newRelationshipCache() *relationshipCache {
	return &relationshipCache{byTD: map[string]*spiretypes.FederationRelationship{}}
}

// replace swaps the whole content for a fresh list.
func (c *relationshipCache) replace(rels []*spiretypes.FederationRelationship) {
	byTD := make(map[string]*spiretypes.FederationRelationship, len(rels))
	for _, r := range rels {
		byTD[r.GetTrustDomain()] = r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byTD = byTD
}

// put stores a relationship as SPIRE echoed it.
func (c *relationshipCache) put(r *spiretypes.FederationRelationship) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byTD[r.GetTrustDomain()] = r
}

// remove forgets the relationship with a trust domain.
func (c *relationshipCache) remove(trustDomain string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byTD, trustDomain)
}

// get returns the relationship with a trust domain, or nil.
func (c *relationshipCache) get(trustDomain string) *spiretypes.FederationRelationship {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byTD[trustDomain]
}

// all returns a copy of the map of every cached relationship.
func (c *relationshipCache) all() map[string]*spiretypes.FederationRelationship {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]*spiretypes.FederationRelationship, len(c.byTD))
	for td, r := range c.byTD {
		out[td] = r
	}
	return out
}
