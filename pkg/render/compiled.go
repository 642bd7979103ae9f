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

package render

import (
	"sync"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// CompiledClusterSPIFFEIDs keeps ClusterSPIFFEIDs compiled across syncs by name, recompiling
// one only when its UID, generation or deletion time changes (status writes change none of
// them). It is safe for concurrent use.
type CompiledClusterSPIFFEIDs struct {
	mu    sync.Mutex
	items map[string]*ClusterSPIFFEID
}

// NewCompiledClusterSPIFFEIDs returns an empty cache.
func NewCompiledClusterSPIFFEIDs() *CompiledClusterSPIFFEIDs {
	return &CompiledClusterSPIFFEIDs{items: map[string]*ClusterSPIFFEID{}}
}

// Get returns the compiled form of a ClusterSPIFFEID.
func (c *CompiledClusterSPIFFEIDs) Get(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if compiled, ok := c.items[in.Name]; ok && compiled.UID == in.UID && compiled.Generation == in.Generation &&
		compiled.Deleted.Equal(deletionTime(in.DeletionTimestamp)) {
		return compiled
	}
	compiled := CompileClusterSPIFFEID(in)
	c.items[in.Name] = compiled
	return compiled
}

// Forget drops a deleted ClusterSPIFFEID.
func (c *CompiledClusterSPIFFEIDs) Forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.items, name)
}

// Active returns the compiled ClusterSPIFFEIDs among all whose className matches, most
// preferred first: the ones a controller renders pods with. Those being deleted take part
// until they are gone, as in spire-controller-manager.
func (c *CompiledClusterSPIFFEIDs) Active(all []*spirev1alpha1.ClusterSPIFFEID, matches func(className string) bool) []*ClusterSPIFFEID {
	active := make([]*ClusterSPIFFEID, 0, len(all))
	for _, in := range all {
		if matches(in.Spec.ClassName) {
			active = append(active, c.Get(in))
		}
	}
	SortByPreference(active)
	return active
}
