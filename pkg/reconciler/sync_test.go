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
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// newTestReconciler connects a reconciler to the in-process SPIRE fake.
func newTestReconciler(t *testing.T, opts Options) (context.Context, *Reconciler, *spiretest.Server) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	server := spiretest.New(t)
	client, err := spire.Dial(ctx, server.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return ctx, NewReconciler(client, opts), server
}

func spiffePaths(entries []*spiretypes.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.GetSpiffeId().GetPath())
	}
	slices.Sort(out)
	return out
}

func declaring(declared ...*render.DeclaredEntry) func(context.Context) (Declared, error) {
	return func(context.Context) (Declared, error) { return Declared{Entries: declared}, nil }
}

// TestSyncStaysInItsScope: a pod sync touches that pod's entries only, whatever else it is
// handed and whatever else the cache holds, and it reads the cache, not SPIRE.
func TestSyncStaysInItsScope(t *testing.T) {
	ctx, r, server := newTestReconciler(t, Options{})
	server.SetEntries(podEntry("e1", "p1", "/old"), podEntry("e2", "p2", "/other"))
	if _, err := r.Resync(ctx, declaring(declare(podEntry("", "p1", "/old"), "web", 0, "p1"),
		declare(podEntry("", "p2", "/other"), "web", 0, "p2"))); err != nil {
		t.Fatal(err)
	}
	server.ResetCalls()

	res, err := r.Sync(ctx, PodScope("p1"), []*render.DeclaredEntry{
		declare(podEntry("", "p1", "/new"), "web", 0, "p1"),
		// Another pod's declaration is not this sync's business.
		declare(podEntry("", "p3", "/stray"), "web", 0, "p3"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/new", "/other"}, spiffePaths(server.Entries())); diff != "" {
		t.Errorf("SPIRE entries (-want +got):\n%s", diff)
	}
	if n := server.Calls(spiretest.MethodListEntries); n != 0 {
		t.Errorf("a pod sync listed SPIRE %d times", n)
	}
	// web still declares an entry for p1, so its counters did not change.
	if len(res.StatusChanged) != 0 {
		t.Errorf("status changed for %v, want none", res.StatusChanged)
	}
	// Now web renders nothing for p1: its counters change, and the entry goes.
	res, err = r.Sync(ctx, PodScope("p1", "web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"web"}, res.StatusChanged); diff != "" {
		t.Errorf("status changed (-want +got):\n%s", diff)
	}
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	r.StatusCounters().Stats("web", &stats)
	if diff := cmp.Diff(spirev1alpha1.ClusterSPIFFEIDStats{EntriesToSet: 1, PodEntryRenderFailures: 1}, stats); diff != "" {
		t.Errorf("web stats (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/other"}, spiffePaths(server.Entries())); diff != "" {
		t.Errorf("SPIRE entries (-want +got):\n%s", diff)
	}
}

// TestResyncCleansUpAndReportsRetries: a resync deletes the leftovers of the prefix being
// cleaned up, leaves entries it does not own alone, and hands back, for retry, the pods whose
// writes failed, without failing itself.
func TestResyncCleansUpAndReportsRetries(t *testing.T) {
	old := "old"
	ctx, r, server := newTestReconciler(t, Options{EntryIDPrefix: "new", EntryIDPrefixCleanup: &old})
	server.SetEntries(podEntry("old.1", "p1", "/a"), podEntry("other.1", "p2", "/b"))
	server.FailNext(spiretest.MethodBatchCreateEntry, 1, codes.Internal)

	res, err := r.Resync(ctx, declaring(declare(podEntry("", "p1", "/a"), "web", 0, "p1")))
	if err != nil {
		t.Fatalf("a refused write failed the resync: %v", err)
	}
	if res.WriteErr == nil {
		t.Errorf("the refused write was not reported")
	}
	if diff := cmp.Diff([]types.UID{"p1"}, res.RetryPods); diff != "" {
		t.Errorf("pods to retry (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"other.1"}, ids(server.Entries())); diff != "" {
		t.Errorf("SPIRE entries (-want +got):\n%s", diff)
	}

	// The retry creates the entry under the new prefix.
	if _, err := r.Sync(ctx, PodScope("p1"), []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "web", 0, "p1")}); err != nil {
		t.Fatal(err)
	}
	got := ids(server.Entries())
	if len(got) != 2 || got[0][:4] != "new." || got[1] != "other.1" {
		t.Errorf("SPIRE entry IDs = %v, want one new.<unique> and other.1", got)
	}
}

// TestResyncKeepsOwnIdentity: over mTLS the controller's own admin entry is made by the
// operator and declared by nothing; a resync without an ID prefix owns every entry, yet must
// not delete that one, or SPIRE refuses the controller from then on.
func TestResyncKeepsOwnIdentity(t *testing.T) {
	own := podEntry("admin-1", "", "/spire-registrar")
	own.Admin = true
	ctx, r, server := newTestReconciler(t, Options{KeepSPIFFEIDs: []string{"spiffe://example.org/spire-registrar"}})
	server.SetEntries(own, podEntry("stray-1", "", "/stray"), podEntry("e1", "p1", "/a"))

	if _, err := r.Resync(ctx, declaring(declare(podEntry("", "p1", "/a"), "web", 0, "p1"))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"admin-1", "e1"}, ids(server.Entries())); diff != "" {
		t.Errorf("SPIRE entries (-want +got):\n%s", diff)
	}
}
