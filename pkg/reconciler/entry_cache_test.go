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
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// replace swaps the whole content of c for a fresh list, as if no write were journaled.
func (c *entryCache) replace(entries []*spiretypes.Entry) {
	idx, in := indexOf(entries)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entryIndex, c.interner = idx, in
}

// replaceListed is replaceIndexed for entries a list returned, as a resync indexes them.
func (c *entryCache) replaceListed(listed []*spiretypes.Entry) {
	idx, in := indexOf(listed)
	c.replaceIndexed(idx, in)
}

func indexOf(entries []*spiretypes.Entry) (entryIndex, *interner) {
	idx, in := newEntryIndex(len(entries)), newInterner()
	for _, e := range entries {
		idx.put(compactEntry(e, in))
	}
	return idx, in
}

func staticEntry(id, path string) *spiretypes.Entry {
	return &spiretypes.Entry{Id: id, SpiffeId: sid(path), ParentId: sid("/spire/server"),
		Selectors: []*spiretypes.Selector{{Type: "unix", Value: "uid:1"}}}
}

// cacheContent is what a test can observe of the cache: the IDs it returns by pod and by key.
type cacheContent struct {
	ByPod map[types.UID][]string
	ByKey map[render.Key][]string
}

func contentOf(c *entryCache, pods []types.UID, keys []render.Key) cacheContent {
	out := cacheContent{ByPod: map[types.UID][]string{}, ByKey: map[render.Key][]string{}}
	for _, uid := range pods {
		if got := ids(c.forPod(uid)); len(got) > 0 {
			out.ByPod[uid] = got
		}
	}
	for _, k := range keys {
		if got := ids(c.forKey(k)); len(got) > 0 {
			out.ByKey[k] = got
		}
	}
	return out
}

func TestEntryCache(t *testing.T) {
	dbKey := render.KeyOf(staticEntry("", "/db"))
	webKey := render.KeyOf(staticEntry("", "/web"))
	pods := []types.UID{"p1", "p2"}
	keys := []render.Key{dbKey, webKey}

	for _, tc := range []struct {
		name string
		// replace fills the cache first; then put and remove run in that order.
		replace []*spiretypes.Entry
		put     []*spiretypes.Entry
		remove  []string
		want    cacheContent
	}{
		{
			name: "empty",
			want: cacheContent{ByPod: map[types.UID][]string{}, ByKey: map[render.Key][]string{}},
		},
		{
			name:    "replace indexes pod entries by UID and others by key",
			replace: []*spiretypes.Entry{podEntry("e1", "p1", "/a"), podEntry("e2", "p1", "/b"), podEntry("e3", "p2", "/a"), staticEntry("s1", "/db"), staticEntry("s2", "/db")},
			want: cacheContent{
				ByPod: map[types.UID][]string{"p1": {"e1", "e2"}, "p2": {"e3"}},
				ByKey: map[render.Key][]string{dbKey: {"s1", "s2"}},
			},
		},
		{
			name:    "replace drops what the previous content held",
			replace: []*spiretypes.Entry{podEntry("e3", "p2", "/a")},
			want:    cacheContent{ByPod: map[types.UID][]string{"p2": {"e3"}}, ByKey: map[render.Key][]string{}},
		},
		{
			name:    "put of a known ID moves the entry to its new pod",
			replace: []*spiretypes.Entry{podEntry("e1", "p1", "/a")},
			put:     []*spiretypes.Entry{podEntry("e1", "p2", "/a")},
			want:    cacheContent{ByPod: map[types.UID][]string{"p2": {"e1"}}, ByKey: map[render.Key][]string{}},
		},
		{
			name:    "put of a known ID moves the entry to its new key",
			replace: []*spiretypes.Entry{staticEntry("s1", "/db")},
			put:     []*spiretypes.Entry{staticEntry("s1", "/web")},
			want:    cacheContent{ByPod: map[types.UID][]string{}, ByKey: map[render.Key][]string{webKey: {"s1"}}},
		},
		{
			name:    "remove forgets the entry and empties its index",
			replace: []*spiretypes.Entry{podEntry("e1", "p1", "/a"), staticEntry("s1", "/db")},
			remove:  []string{"e1", "s1", "unknown"},
			want:    cacheContent{ByPod: map[types.UID][]string{}, ByKey: map[render.Key][]string{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newEntryCache()
			c.replace([]*spiretypes.Entry{podEntry("old", "p1", "/old"), staticEntry("old-static", "/web")})
			c.replace(tc.replace)
			for _, e := range tc.put {
				c.put(e)
			}
			for _, id := range tc.remove {
				c.remove(id)
			}
			if diff := cmp.Diff(tc.want, contentOf(c, pods, keys)); diff != "" {
				t.Errorf("cache content (-want +got):\n%s", diff)
			}
			// Every index is consistent with the ID index.
			if got, want := len(c.byID), countIndexed(c); got != want {
				t.Errorf("%d entries by ID, %d in the pod and key indexes", got, want)
			}
		})
	}
}

func countIndexed(c *entryCache) int {
	n := 0
	for _, m := range c.byPod {
		n += len(m)
	}
	for _, m := range c.byKey {
		n += len(m)
	}
	return n
}

// TestEntryCacheReturnsWhatItWasGiven: entries come back as SPIRE echoed them, and the
// returned slice is the caller's to modify.
func TestEntryCacheReturnsWhatItWasGiven(t *testing.T) {
	c := newEntryCache()
	e := podEntry("e1", "p1", "/a", "x.example")
	c.put(e)
	got := c.forPod("p1")
	if diff := cmp.Diff([]*spiretypes.Entry{podEntry("e1", "p1", "/a", "x.example")}, got, protocmp.Transform()); diff != "" {
		t.Errorf("forPod (-want +got):\n%s", diff)
	}
	got[0] = nil
	if again := c.forPod("p1"); !slices.ContainsFunc(again, func(x *spiretypes.Entry) bool { return x.GetId() == "e1" }) {
		t.Errorf("modifying a returned slice changed the cache: %v", again)
	}
}

// TestEntryCacheSharesRepeatedParts: entries listed or put keep their content, while what
// they repeat (parent ID, selectors) is held once.
func TestEntryCacheSharesRepeatedParts(t *testing.T) {
	c := newEntryCache()
	c.beginList()
	c.replaceListed([]*spiretypes.Entry{podEntry("e1", "p1", "/a", "x.example"), podEntry("e2", "p1", "/b")})
	c.put(podEntry("e3", "p1", "/c"))
	got := c.forPod("p1")
	slices.SortFunc(got, func(a, b *spiretypes.Entry) int { return strings.Compare(a.GetId(), b.GetId()) })
	want := []*spiretypes.Entry{podEntry("e1", "p1", "/a", "x.example"), podEntry("e2", "p1", "/b"), podEntry("e3", "p1", "/c")}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("forPod (-want +got):\n%s", diff)
	}
	for _, e := range got[1:] {
		if e.GetParentId() != got[0].GetParentId() || e.GetSelectors()[0] != got[0].GetSelectors()[0] {
			t.Errorf("entry %s holds its own copy of the parent ID or pod selector", e.GetId())
		}
	}
}
