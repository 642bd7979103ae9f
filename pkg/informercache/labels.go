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

package informercache

import (
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"
)

// labelSet is a pod label map that pods with the same labels share: the pods of one
// ReplicaSet, Job or StatefulSet revision have the same labels, and a map of a few labels
// takes about 300 bytes.
type labelSet struct {
	m map[string]string
}

// labelSetInterner hands out one labelSet per distinct label map. It holds them weakly: a set
// no cached pod points to any more is collected, and forgotten here.
type labelSetInterner struct {
	mu   sync.Mutex
	sets map[string]weak.Pointer[labelSet]
}

var labelSets = &labelSetInterner{sets: map[string]weak.Pointer[labelSet]{}}

// intern returns the shared set holding the same labels as m, which it may adopt: m must not
// be modified afterwards.
func (in *labelSetInterner) intern(m map[string]string) *labelSet {
	key := labelKey(m)
	in.mu.Lock()
	defer in.mu.Unlock()
	if shared := in.sets[key].Value(); shared != nil {
		return shared
	}
	set := &labelSet{m: m}
	in.sets[key] = weak.Make(set)
	runtime.AddCleanup(set, in.forget, key)
	return set
}

// forget drops a collected set, unless the key was interned again since.
func (in *labelSetInterner) forget(key string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.sets[key].Value() == nil {
		delete(in.sets, key)
	}
}

// labelKey is a string that only equal label maps share. Label keys and values cannot hold
// NUL (the API server validates them), so NUL separators cannot be forged.
func labelKey(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}
