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
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"

	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// TestResyncUsesThePrefetchedList: the first resync takes the listing Prefetch started
// instead of listing again, and a write a sync made while that listing ran is neither lost
// nor repeated.
func TestResyncUsesThePrefetchedList(t *testing.T) {
	ctx, r, server, gate := newGatedReconciler(t, true)
	server.SetEntries(podEntry("e1", "p1", "/a"))
	gate.arm()
	r.Prefetch(ctx)
	r.Prefetch(ctx) // a second call before the resync does nothing
	<-gate.reached

	// SPIRE was listed (e1 only); p2's entry is created after.
	syncWithin(ctx, t, r, PodScope("p2"), declare(podEntry("", "p2", "/b"), "web", 0, "p2"))
	close(gate.release)

	if _, err := r.Resync(ctx, declaring(declare(podEntry("", "p1", "/a"), "web", 0, "p1"),
		declare(podEntry("", "p2", "/b"), "web", 0, "p2"))); err != nil {
		t.Fatal(err)
	}
	// One listing is two calls: its page, and the empty page that ends it.
	if n := server.Calls(spiretest.MethodListEntries); n != 2 {
		t.Errorf("SPIRE got %d list calls, want the 2 of one listing: the resync listed again", n)
	}
	if n := server.Calls(spiretest.MethodBatchCreateEntry); n != 1 {
		t.Errorf("%d create calls, want 1: p2's entry was created again", n)
	}
	if diff := cmp.Diff([]string{"/a", "/b"}, spiffePaths(server.Entries())); diff != "" {
		t.Errorf("SPIRE entries (-want +got):\n%s", diff)
	}
}

// TestFailedPrefetchIsListedAgain: a prefetched listing that failed fails the resync, which
// writes nothing; the next resync lists SPIRE itself.
func TestFailedPrefetchIsListedAgain(t *testing.T) {
	ctx, r, server := newTestReconciler(t, Options{})
	server.SetEntries(podEntry("e1", "p1", "/a"))
	server.FailNext(spiretest.MethodListEntries, 1, codes.Unavailable)
	r.Prefetch(ctx)
	declared := declaring(declare(podEntry("", "p1", "/a"), "web", 0, "p1"))
	if _, err := r.Resync(ctx, declared); err == nil {
		t.Fatal("the resync succeeded on a failed listing")
	}
	if _, err := r.Resync(ctx, declared); err != nil {
		t.Fatal(err)
	}
	if n := server.Calls(spiretest.MethodBatchCreateEntry) + server.Calls(spiretest.MethodBatchDeleteEntry); n != 0 {
		t.Errorf("%d writes, want none", n)
	}
}

// pagedMemClient lists a memClient's entries in pages of pageSize, each entry of the first
// page listed again on the second, as a server paging under concurrent writes may.
type pagedMemClient struct {
	*memClient
	pageSize int
	pages    int
}

func (c *pagedMemClient) ListEntryPages(ctx context.Context, page func([]*spiretypes.Entry) error) error {
	all, err := c.ListEntries(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b *spiretypes.Entry) int { return strings.Compare(a.Id, b.Id) })
	for lo := 0; lo < len(all); lo += c.pageSize {
		p := all[lo:min(lo+c.pageSize, len(all))]
		if lo == c.pageSize {
			p = append(slices.Clone(all[:c.pageSize]), p...)
		}
		c.pages++
		if err := page(p); err != nil {
			return err
		}
	}
	return nil
}

// TestResyncIndexesAPagedListing: a listing handed over page by page is indexed as the whole
// list would be, entries listed twice once, and a steady state writes nothing.
func TestResyncIndexesAPagedListing(t *testing.T) {
	ctx := context.Background()
	mem := newMemClient()
	client := &pagedMemClient{memClient: mem, pageSize: 2}
	r := NewReconciler(client, Options{})
	var declared []*render.DeclaredEntry
	for i := range 5 {
		uid := fmt.Sprintf("p%d", i)
		declared = append(declared, declare(podEntry("", uid, "/"+uid), "web", 0, uid))
	}
	if _, err := r.Resync(ctx, declaring(declared...)); err != nil {
		t.Fatal(err)
	}
	client.pages = 0
	res, err := r.Resync(ctx, declaring(declared...))
	if err != nil {
		t.Fatal(err)
	}
	if client.pages != 3 {
		t.Errorf("the resync took %d pages, want the 3 of the paged listing", client.pages)
	}
	if n := res.Plan.writes(); n != 0 || len(res.Plan.InSync) != 5 {
		t.Errorf("steady state planned %d writes and %d in sync, want 0 and 5", n, len(res.Plan.InSync))
	}
	if n := r.cache.size(); n != 5 {
		t.Errorf("the cache holds %d entries, want 5", n)
	}
	for i := range 5 {
		if got := r.cache.forPod(types.UID(fmt.Sprintf("p%d", i))); len(got) != 1 {
			t.Errorf("pod p%d has %d cached entries, want 1", i, len(got))
		}
	}
}
