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
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

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
