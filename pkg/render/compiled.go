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
	"fmt"
	"sync"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// CompiledClusterSPIFFEIDs keeps ClusterSPIFFEIDs compiled across syncs by name, recompiling
// one only when its UID, generation or deletion time changes (status writes change none of
// them), and keeps the memory of all their templates under maxCompiledBytes. It is safe for
// concurrent use, and compiles outside its lock: one ClusterSPIFFEID's templates never hold up
// a worker that reads another's.
type CompiledClusterSPIFFEIDs struct {
	mu    sync.Mutex
	items map[string]*ClusterSPIFFEID
	// cost is what the compiled templates of items may keep, together.
	cost int
	// compile is CompileClusterSPIFFEID; tests hold it at a gate.
	compile func(*spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID
}

// NewCompiledClusterSPIFFEIDs returns an empty cache.
func NewCompiledClusterSPIFFEIDs() *CompiledClusterSPIFFEIDs {
	return &CompiledClusterSPIFFEIDs{items: map[string]*ClusterSPIFFEID{}, compile: CompileClusterSPIFFEID}
}

// Get returns the compiled form of a ClusterSPIFFEID.
func (c *CompiledClusterSPIFFEIDs) Get(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
	if compiled := c.current(in); compiled != nil {
		return compiled
	}
	compiled := c.compile(in)
	c.mu.Lock()
	defer c.mu.Unlock()
	if current := c.currentLocked(in); current != nil {
		return current // Compiled meanwhile by another worker.
	}
	if old, ok := c.items[in.Name]; ok {
		c.cost -= old.cost
	}
	if compiled.cost > maxCompiledBytes-c.cost {
		compiled = compiled.withoutTemplates(fmt.Errorf("the templates of all ClusterSPIFFEIDs would keep more than %d MiB: "+
			"this one renders nothing until others are removed or made smaller", maxCompiledBytes>>20))
	}
	c.items[in.Name] = compiled
	c.cost += compiled.cost
	return compiled
}

// current returns the compiled ClusterSPIFFEID when it is current, else nil.
func (c *CompiledClusterSPIFFEIDs) current(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.currentLocked(in)
}

func (c *CompiledClusterSPIFFEIDs) currentLocked(in *spirev1alpha1.ClusterSPIFFEID) *ClusterSPIFFEID {
	compiled, ok := c.items[in.Name]
	if ok && compiled.UID == in.UID && compiled.Generation == in.Generation && compiled.Deleted.Equal(deletionTime(in.DeletionTimestamp)) {
		return compiled
	}
	return nil
}

// Forget drops a deleted ClusterSPIFFEID.
func (c *CompiledClusterSPIFFEIDs) Forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.items[name]; ok {
		c.cost -= old.cost
		delete(c.items, name)
	}
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
