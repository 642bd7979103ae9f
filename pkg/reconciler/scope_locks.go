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
	"hash/maphash"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// scopeKey names the smallest unit the reconciler writes alone: one pod's entries (pod set),
// or the entries of no pod that have one key (key set).
type scopeKey struct {
	pod types.UID
	key render.Key
}

func podScopeKey(uid types.UID) scopeKey { return scopeKey{pod: uid} }

func entryKeyScopeKey(k render.Key) scopeKey { return scopeKey{key: k} }

// scopeOf returns the scope a declared entry is synced in: its pod's, or its key's.
func scopeOf(d *render.DeclaredEntry) scopeKey {
	if d.Declarer.PodUID != "" {
		return podScopeKey(d.Declarer.PodUID)
	}
	return entryKeyScopeKey(d.Key)
}

func (k scopeKey) String() string {
	if k.pod != "" {
		return "pod/" + string(k.pod)
	}
	return "key/" + string(k.key)
}

// scopeLockStripes is how many mutexes the scopes share. Enough that a resync writing one
// chunk of scopes rarely holds the stripe of the pod a sync waits for.
const scopeLockStripes = 1024

// scopeLocks serialize the writes of one scope: a sync, and a resync applying its plan to
// that scope, never interleave. Scopes share striped mutexes, so memory does not grow with
// the number of pods.
type scopeLocks struct {
	seed    maphash.Seed
	stripes [scopeLockStripes]sync.Mutex
}

func newScopeLocks() *scopeLocks {
	return &scopeLocks{seed: maphash.MakeSeed()}
}

// stripe returns the index of a scope's mutex.
func (l *scopeLocks) stripe(k scopeKey) int {
	return int(maphash.Comparable(l.seed, k) % scopeLockStripes)
}

// lock takes the mutexes of scopes, in stripe order so that no two callers deadlock, and
// returns the function that releases them.
func (l *scopeLocks) lock(scopes ...scopeKey) (unlock func()) {
	stripes := make([]int, 0, len(scopes))
	for _, k := range scopes {
		stripes = append(stripes, l.stripe(k))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, s := range stripes {
		l.stripes[s].Lock()
	}
	return func() {
		for _, s := range slices.Backward(stripes) {
			l.stripes[s].Unlock()
		}
	}
}
