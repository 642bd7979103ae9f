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

package runner

import (
	"fmt"
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// Handlers are the event handlers a controller added to shared informers. A controller
// removes them when it stops (Loop.Handlers), so that informers which outlive it, as they do
// across a leader's terms, neither keep calling into its shut-down queues nor keep it in
// memory; the next term's controller adds its own.
type Handlers struct {
	mu    sync.Mutex
	added []handler
}

type handler struct {
	informer     cache.SharedInformer
	registration cache.ResourceEventHandlerRegistration
}

// Add adds h to informer and remembers it.
func (hs *Handlers) Add(informer cache.SharedInformer, h cache.ResourceEventHandler) error {
	registration, err := informer.AddEventHandler(h)
	if err != nil {
		return fmt.Errorf("adding event handler: %w", err)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.added = append(hs.added, handler{informer: informer, registration: registration})
	return nil
}

// RemoveAll removes every handler added so far.
func (hs *Handlers) RemoveAll() {
	hs.mu.Lock()
	added := hs.added
	hs.added = nil
	hs.mu.Unlock()
	for _, h := range added {
		if err := h.informer.RemoveEventHandler(h.registration); err != nil {
			utilruntime.HandleError(fmt.Errorf("removing event handler: %w", err))
		}
	}
}

// Unwrap returns the object of an informer event as a T, including the last known state of
// a deleted one whose deletion the informer missed (a tombstone). It reports false for an
// object of any other type.
func Unwrap[T any](obj any) (T, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	t, ok := obj.(T)
	return t, ok
}
