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
	"hash/maphash"
	"maps"
	"runtime"
	"slices"
	"sync"
	"unsafe"
	"weak"
)

// mapInterner hands out one map per distinct content of the label, annotation and node
// selector maps of the pods one cache keeps: the pods of one ReplicaSet, Job or StatefulSet
// revision have the same ones, and a map of a few entries takes about 300 bytes. It holds the
// maps weakly: a map no cached pod points to any more is collected, and forgotten here. Each
// informer transform owns one (see NewTrim), so caches never share maps.
type mapInterner struct {
	mu   sync.Mutex
	seed maphash.Seed
	// maps holds the interned maps by the hash of their content.
	maps map[uint64][]weak.Pointer[byte]
}

func newMapInterner() *mapInterner {
	return &mapInterner{seed: maphash.MakeSeed(), maps: map[uint64][]weak.Pointer[byte]{}}
}

// intern returns the shared map holding the same entries as m, which it may adopt: m must not
// be modified afterwards, nor the map returned. An empty map is nil.
func (in *mapInterner) intern(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	h := in.hash(m)
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, w := range in.maps[h] {
		if shared := w.Value(); shared != nil && maps.Equal(mapAt(shared), m) {
			return mapAt(shared)
		}
	}
	obj := mapObject(m)
	in.maps[h] = append(in.maps[h], weak.Make(obj))
	runtime.AddCleanup(obj, in.forget, h)
	return m
}

// forget drops the collected maps of a hash.
func (in *mapInterner) forget(h uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	live := slices.DeleteFunc(in.maps[h], func(w weak.Pointer[byte]) bool { return w.Value() == nil })
	if len(live) == 0 {
		delete(in.maps, h)
		return
	}
	in.maps[h] = live
}

// hash is the same for maps of the same entries, in any order.
func (in *mapInterner) hash(m map[string]string) uint64 {
	var sum uint64
	for k, v := range m {
		var h maphash.Hash
		h.SetSeed(in.seed)
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)
		sum += h.Sum64()
	}
	return sum
}

// mapObject is the object a map value points to, which every copy of the map keeps alive;
// mapAt is the map of that object. A map value is a pointer, so a weak pointer to that object
// tells when no copy of the map is left.
func mapObject(m map[string]string) *byte { return *(**byte)(unsafe.Pointer(&m)) }
func mapAt(p *byte) map[string]string     { return *(*map[string]string)(unsafe.Pointer(&p)) }
