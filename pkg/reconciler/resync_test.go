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
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

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

// gatedList holds the ListEntries call that follows arm until the test releases it: with
// listFirst, after SPIRE answered (writes made meanwhile are missing from the list);
// otherwise before it asks (they are in it too).
type gatedList struct {
	spire.EntryClient
	listFirst bool
	armed     bool
	reached   chan struct{}
	release   chan struct{}
}

// arm makes the next list wait for release. It must happen before the list is called.
func (g *gatedList) arm() {
	g.armed = true
	g.reached = make(chan struct{})
	g.release = make(chan struct{})
}

func (g *gatedList) ListEntries(ctx context.Context) ([]*spiretypes.Entry, error) {
	if !g.armed {
		return g.EntryClient.ListEntries(ctx)
	}
	g.armed = false
	if !g.listFirst {
		close(g.reached)
		<-g.release
		return g.EntryClient.ListEntries(ctx)
	}
	all, err := g.EntryClient.ListEntries(ctx)
	close(g.reached)
	<-g.release
	return all, err
}

// newGatedReconciler connects a reconciler to the SPIRE fake through a gate on its next list.
func newGatedReconciler(t *testing.T, listFirst bool) (context.Context, *Reconciler, *spiretest.Server, *gatedList) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	server := spiretest.New(t)
	client, err := spire.Dial(ctx, server.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	gate := &gatedList{EntryClient: client, listFirst: listFirst}
	return ctx, NewReconciler(gate, Options{}), server, gate
}

// syncWithin runs a Sync and fails the test if it has not returned long after it should have:
// a sync that waits for a blocked list never returns at all.
func syncWithin(ctx context.Context, t *testing.T, r *Reconciler, scope Scope, declared ...*render.DeclaredEntry) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := r.Sync(ctx, scope, declared)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sync of %v: %v", scope, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sync of %v did not return while the resync's list was blocked", scope)
	}
}

type spireEntry struct {
	Path string
	DNS  []string
}

func spireContent(entries []*spiretypes.Entry) map[string]spireEntry {
	out := map[string]spireEntry{}
	for _, e := range entries {
		out[e.GetId()] = spireEntry{Path: e.GetSpiffeId().GetPath(), DNS: e.GetDnsNames()}
	}
	return out
}

// TestSyncsDuringResyncList: syncs run while a resync's list is in flight, whether the list
// saw their writes or not, and the resync neither loses, repeats nor undoes any of them: a
// pod created meanwhile gets its entry once, an updated entry is not updated again, and a
// deleted one does not come back.
func TestSyncsDuringResyncList(t *testing.T) {
	for _, listFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("listedBeforeTheWrites=%v", listFirst), func(t *testing.T) {
			ctx, r, server, gate := newGatedReconciler(t, listFirst)
			server.SetEntries(podEntry("e1", "p1", "/a"), podEntry("e3", "p3", "/c"))
			if _, err := r.Resync(ctx, declaring(declare(podEntry("", "p1", "/a"), "web", 0, "p1"),
				declare(podEntry("", "p3", "/c"), "web", 0, "p3"))); err != nil {
				t.Fatal(err)
			}

			gate.arm()
			type outcome struct {
				res ResyncResult
				err error
			}
			resynced := make(chan outcome, 1)
			p1 := declare(podEntry("", "p1", "/a", "a.example"), "web", 0, "p1")
			p2 := declare(podEntry("", "p2", "/b"), "web", 0, "p2")
			go func() {
				// What the cluster declares once the list is in: p3 went, p2 came, p1 changed.
				res, err := r.Resync(ctx, declaring(p1, p2))
				resynced <- outcome{res, err}
			}()
			<-gate.reached
			server.ResetCalls()
			syncWithin(ctx, t, r, PodScope("p1"), p1)
			syncWithin(ctx, t, r, PodScope("p2"), p2)
			syncWithin(ctx, t, r, PodScope("p3"))
			if got, want := server.WriteCalls(), 3; got != want {
				t.Fatalf("the syncs made %d write calls, want %d", got, want)
			}
			wantEntries := spireContent(server.Entries())
			close(gate.release)
			out := <-resynced
			if out.err != nil {
				t.Fatal(out.err)
			}

			if n := server.WriteCalls(); n != 3 {
				t.Errorf("the resync wrote again what the syncs wrote: %d write calls in all, want 3; plan %+v", n, out.res.Plan)
			}
			if diff := cmp.Diff(map[string]spireEntry{"e1": {Path: "/a", DNS: []string{"a.example"}}}, filterPath(wantEntries, "/a")); diff != "" {
				t.Errorf("p1's entry after its sync (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantEntries, spireContent(server.Entries())); diff != "" {
				t.Errorf("SPIRE entries after the resync (-after syncs +after resync):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"/a", "/b"}, spiffePaths(server.Entries())); diff != "" {
				t.Errorf("SPIRE entries (-want +got):\n%s", diff)
			}
			// A sync after the resync agrees with SPIRE: the cache holds what SPIRE holds.
			server.ResetCalls()
			for _, d := range []*render.DeclaredEntry{p1, p2} {
				if _, err := r.Sync(ctx, PodScope(d.Declarer.PodUID), []*render.DeclaredEntry{d}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.Sync(ctx, PodScope("p3"), nil); err != nil {
				t.Fatal(err)
			}
			if n := server.WriteCalls(); n != 0 {
				t.Errorf("syncs after the resync wrote %d times: the cache is not what SPIRE holds", n)
			}
		})
	}
}

func filterPath(m map[string]spireEntry, path string) map[string]spireEntry {
	out := map[string]spireEntry{}
	for id, e := range m {
		if e.Path == path {
			out[id] = e
		}
	}
	return out
}

// TestResyncLeavesScopesSyncedMeanwhile: declare runs while syncs go on, and a pod that a sync
// wrote after the list was merged is that sync's: the resync, whose declaration may predate
// the pod, neither deletes its entry nor overwrites its status counters.
func TestResyncLeavesScopesSyncedMeanwhile(t *testing.T) {
	ctx, r, server := newTestReconciler(t, Options{})
	server.SetEntries(podEntry("e1", "p1", "/a"))
	p2 := declare(podEntry("", "p2", "/b"), "web", 0, "p2")
	res, err := r.Resync(ctx, func(ctx context.Context) (Declared, error) {
		// The sync runs inside declare: declare does not exclude syncs.
		syncWithin(ctx, t, r, PodScope("p2"), p2)
		return Declared{Entries: []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "web", 0, "p1")}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.ToDelete) != 0 {
		t.Errorf("the resync deleted %v", ids(res.Plan.ToDelete))
	}
	if diff := cmp.Diff([]string{"/a", "/b"}, spiffePaths(server.Entries())); diff != "" {
		t.Errorf("SPIRE entries (-want +got):\n%s", diff)
	}
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	r.StatusCounters().Stats("web", &stats)
	if diff := cmp.Diff(spirev1alpha1.ClusterSPIFFEIDStats{EntriesToSet: 2}, stats); diff != "" {
		t.Errorf("web stats (-want +got):\n%s", diff)
	}
}

// TestResyncWritesInBatches: a start-up that creates many entries of many pods sends them in
// SPIRE's batches, not one call per pod, though every pod is written under its own lock.
func TestResyncWritesInBatches(t *testing.T) {
	ctx, r, server := newTestReconciler(t, Options{})
	const pods = 1500
	var declared []*render.DeclaredEntry
	for i := range pods {
		uid := fmt.Sprintf("p%d", i)
		declared = append(declared, declare(podEntry("", uid, "/"+uid), "web", 0, uid))
	}
	res, err := r.Resync(ctx, declaring(declared...))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.ToCreate) != pods || len(server.Entries()) != pods {
		t.Fatalf("planned %d creates, SPIRE holds %d entries; want %d", len(res.Plan.ToCreate), len(server.Entries()), pods)
	}
	// 1500 creates in chunks of resyncChunkWrites, each sent in batches of 500.
	if n := server.Calls(spiretest.MethodBatchCreateEntry); n > 4 {
		t.Errorf("%d create calls for %d entries, want at most 4", n, pods)
	}
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	r.StatusCounters().Stats("web", &stats)
	if stats.EntriesToSet != pods {
		t.Errorf("web counts %d entries to set, want %d", stats.EntriesToSet, pods)
	}
}

// TestFailedListKeepsCache: a resync whose list fails writes nothing and leaves the cache as
// it was.
func TestFailedListKeepsCache(t *testing.T) {
	ctx, r, server := newTestReconciler(t, Options{})
	server.SetEntries(podEntry("e1", "p1", "/a"))
	p1 := declare(podEntry("", "p1", "/a"), "web", 0, "p1")
	if _, err := r.Resync(ctx, declaring(p1)); err != nil {
		t.Fatal(err)
	}
	server.FailNext(spiretest.MethodListEntries, 1, codes.Unavailable)
	server.ResetCalls()
	if _, err := r.Resync(ctx, declaring()); err == nil {
		t.Fatal("a resync whose list failed succeeded")
	}
	if n := server.WriteCalls(); n != 0 {
		t.Errorf("a resync whose list failed wrote %d times", n)
	}
	if _, err := r.Sync(ctx, PodScope("p1"), []*render.DeclaredEntry{p1}); err != nil {
		t.Fatal(err)
	}
	if n := server.WriteCalls(); n != 0 {
		t.Errorf("after a failed list the cache lost p1's entry: its sync wrote %d times", n)
	}
}

// TestSyncsAndResyncsConverge creates pods one after another and deletes others while full
// resyncs run back to back, then syncs every pod once more: SPIRE must then hold every
// declared entry once and nothing else, so the cache lost no write and no write was repeated,
// and a last resync writes nothing. The in-memory SPIRE does not refuse duplicates, so an
// entry the cache lost shows as a duplicate.
func TestSyncsAndResyncsConverge(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newMemClient()
	client.listDelay = time.Millisecond
	r := NewReconciler(client, Options{})

	const pods = 300
	live := map[types.UID][]*render.DeclaredEntry{}
	var order []types.UID
	for i := range pods {
		uid := types.UID(fmt.Sprintf("p%d", i))
		order = append(order, uid)
		if i%4 == 3 {
			// Gone pods: SPIRE holds their entries, nothing declares them.
			if _, err := client.CreateEntries(ctx, []*spiretypes.Entry{podEntry("", string(uid), "/gone/"+string(uid))}); err != nil {
				t.Fatal(err)
			}
			live[uid] = nil
			continue
		}
		for k := range 2 {
			live[uid] = append(live[uid], declare(podEntry("", string(uid), fmt.Sprintf("/%s/%d", uid, k)), fmt.Sprintf("id-%d", k), 0, string(uid)))
		}
	}
	// The cluster as declare sees it: the pods created so far.
	var mu sync.Mutex
	var declared []*render.DeclaredEntry
	declareAll := func(context.Context) (Declared, error) {
		mu.Lock()
		defer mu.Unlock()
		return Declared{Entries: slices.Clone(declared)}, nil
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := r.Resync(ctx, declareAll); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() {
		defer close(done)
		for _, uid := range order {
			mu.Lock()
			declared = append(declared, live[uid]...)
			mu.Unlock()
			if _, err := r.Sync(ctx, PodScope(uid), live[uid]); err != nil {
				t.Error(err)
				return
			}
			runtime.Gosched()
		}
	})
	wg.Wait()
	for uid, ds := range live {
		if _, err := r.Sync(ctx, PodScope(uid), ds); err != nil {
			t.Fatal(err)
		}
	}

	var want []string
	for _, d := range declared {
		want = append(want, d.Entry.GetSpiffeId().GetPath())
	}
	slices.Sort(want)
	listed, _ := client.ListEntries(ctx)
	if diff := cmp.Diff(want, spiffePaths(listed)); diff != "" {
		t.Errorf("SPIRE entries (-want +got):\n%s", diff)
	}
	res, err := r.Resync(ctx, declareAll)
	if err != nil {
		t.Fatal(err)
	}
	if w := res.Plan.writes(); w != 0 {
		t.Errorf("a resync after convergence planned %d writes", w)
	}
}

// TestDeclareRunsWhileSPIREIsListed: declare does not wait for SPIRE's list, so that at
// start-up rendering every pod's entries overlaps with SPIRE listing them.
func TestDeclareRunsWhileSPIREIsListed(t *testing.T) {
	ctx, r, server, gate := newGatedReconciler(t, true)
	server.SetEntries(podEntry("e1", "p1", "/a"))
	gate.arm()
	declared := make(chan struct{})
	resynced := make(chan error, 1)
	go func() {
		_, err := r.Resync(ctx, func(context.Context) (Declared, error) {
			close(declared)
			return Declared{Entries: []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "web", 0, "p1")}}, nil
		})
		resynced <- err
	}()
	<-gate.reached
	select {
	case <-declared:
	case <-time.After(30 * time.Second):
		t.Fatal("declare did not run while SPIRE's list was held")
	}
	close(gate.release)
	if err := <-resynced; err != nil {
		t.Fatal(err)
	}
	if n := server.WriteCalls(); n != 0 {
		t.Errorf("the resync wrote %d times, want 0", n)
	}
}
