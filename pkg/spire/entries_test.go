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

package spire

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// recordedCall is one call that reached the inner client.
type recordedCall struct {
	method string
	items  int
	mask   *types.EntryMask
	// paths are the SPIFFE ID paths of the entries (creates and updates).
	paths []string
}

// innerRecorder sits between a BatchingClient and the real Client: it records
// every inner call and, when gated, holds each one until the test releases it,
// which makes batch boundaries deterministic.
type innerRecorder struct {
	EntryClient
	gated bool
	// gate releases one held call per value.
	gate chan struct{}
	// entered receives the method name of each call as it reaches the
	// recorder, before the gate.
	entered chan string

	mu    sync.Mutex
	calls []recordedCall
}

func newRecorder(inner EntryClient, gated bool) *innerRecorder {
	return &innerRecorder{EntryClient: inner, gated: gated, gate: make(chan struct{}), entered: make(chan string, 1000)}
}

func (r *innerRecorder) hold(ctx context.Context, rc recordedCall) error {
	r.mu.Lock()
	r.calls = append(r.calls, rc)
	r.mu.Unlock()
	r.entered <- rc.method
	if !r.gated {
		return nil
	}
	select {
	case <-r.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func entryPaths(es []*types.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.GetSpiffeId().GetPath()
	}
	return out
}

func (r *innerRecorder) CreateEntries(ctx context.Context, es []*types.Entry) ([]EntryResult, error) {
	if err := r.hold(ctx, recordedCall{method: "create", items: len(es), paths: entryPaths(es)}); err != nil {
		return nil, err
	}
	return r.EntryClient.CreateEntries(ctx, es)
}

func (r *innerRecorder) UpdateEntries(ctx context.Context, es []*types.Entry, mask *types.EntryMask) ([]EntryResult, error) {
	if err := r.hold(ctx, recordedCall{method: "update", items: len(es), mask: mask, paths: entryPaths(es)}); err != nil {
		return nil, err
	}
	return r.EntryClient.UpdateEntries(ctx, es, mask)
}

func (r *innerRecorder) DeleteEntries(ctx context.Context, ids []string) ([]DeleteResult, error) {
	if err := r.hold(ctx, recordedCall{method: "delete", items: len(ids)}); err != nil {
		return nil, err
	}
	return r.EntryClient.DeleteEntries(ctx, ids)
}

func (r *innerRecorder) recorded() []recordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedCall(nil), r.calls...)
}

// release lets one held inner call proceed.
func (r *innerRecorder) release(t *testing.T) {
	t.Helper()
	select {
	case r.gate <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("no inner call waiting to be released")
	}
}

// waitEntered waits until the next inner call reaches the recorder.
func (r *innerRecorder) waitEntered(t *testing.T) string {
	t.Helper()
	select {
	case m := <-r.entered:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no inner call was made")
		return ""
	}
}

// waitCalls waits until the client has accepted n write calls, so the test
// knows they are queued.
func waitCalls(t *testing.T, c *BatchingClient, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Calls < n {
		if time.Now().After(deadline) {
			t.Fatalf("client accepted %d calls, want %d", c.Stats().Calls, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// result is what one asynchronous caller got back.
type result struct {
	res []EntryResult
	err error
}

// goCreate calls CreateEntries in a goroutine and returns where its result
// will arrive.
func goCreate(ctx context.Context, c *BatchingClient, es ...*types.Entry) <-chan result {
	ch := make(chan result, 1)
	go func() {
		res, err := c.CreateEntries(ctx, es)
		ch <- result{res, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("caller did not return")
		return result{}
	}
}

// newBatching builds a BatchingClient over a recorder over a real Client on a
// fresh fake server, closed when the test ends.
func newBatching(t *testing.T, gated bool, opts BatchingOptions) (*BatchingClient, *innerRecorder, *spiretest.Server) {
	t.Helper()
	srv := spiretest.New(t)
	rec := newRecorder(newClient(t, srv), gated)
	c := NewBatchingClient(rec, opts)
	t.Cleanup(c.Close)
	return c, rec, srv
}

// TestBatchingRoutesResults runs 200 callers at once, each creating,
// updating and deleting entries of its own, and checks that every caller gets
// exactly its own results in its own order while calls are coalesced.
func TestBatchingRoutesResults(t *testing.T) {
	const callers = 200
	c, rec, srv := newBatching(t, false, BatchingOptions{MaxBatch: 64})
	ctx := context.Background()
	mask := &types.EntryMask{Hint: true}

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			<-start
			if err := routeOne(ctx, c, i, mask); err != nil {
				errs <- fmt.Errorf("caller %d: %w", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(srv.Entries()); n != 0 {
		t.Errorf("server has %d entries left, want 0", n)
	}

	st := c.Stats()
	if st.Calls != 3*callers {
		t.Errorf("Stats().Calls = %d, want %d", st.Calls, 3*callers)
	}
	calls := rec.recorded()
	if int64(len(calls)) != st.Batches {
		t.Errorf("inner calls = %d, Stats().Batches = %d", len(calls), st.Batches)
	}
	items := 0
	for _, rc := range calls {
		items += rc.items
		if rc.items > 64 {
			t.Errorf("inner %s call with %d items exceeds MaxBatch 64", rc.method, rc.items)
		}
	}
	if int64(items) != st.Items {
		t.Errorf("inner calls carried %d items, Stats().Items = %d", items, st.Items)
	}
	t.Logf("%d caller calls in %d inner calls", st.Calls, st.Batches)
}

// routeOne is one caller of TestBatchingRoutesResults: 1 to 3 entries of its
// own, created, updated with a caller-specific hint, then deleted.
func routeOne(ctx context.Context, c *BatchingClient, i int, mask *types.EntryMask) error {
	n := 1 + i%3
	in := make([]*types.Entry, n)
	for j := range in {
		in[j] = entry(fmt.Sprintf("/caller/%d/%d", i, j))
	}
	created, err := c.CreateEntries(ctx, in)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if len(created) != n {
		return fmt.Errorf("create: %d results for %d entries", len(created), n)
	}
	upd := make([]*types.Entry, n)
	for j, r := range created {
		if r.Err != nil {
			return fmt.Errorf("create result %d: %w", j, r.Err)
		}
		if got, want := r.Entry.GetSpiffeId().GetPath(), in[j].SpiffeId.Path; got != want {
			return fmt.Errorf("create result %d is for %s, want %s", j, got, want)
		}
		upd[j] = &types.Entry{Id: r.Entry.Id, Hint: fmt.Sprintf("hint-%d-%d", i, j)}
	}
	updated, err := c.UpdateEntries(ctx, upd, mask)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if len(updated) != n {
		return fmt.Errorf("update: %d results for %d entries", len(updated), n)
	}
	ids := make([]string, n)
	for j, r := range updated {
		if r.Err != nil {
			return fmt.Errorf("update result %d: %w", j, r.Err)
		}
		if r.Entry.GetId() != upd[j].Id || r.Entry.GetHint() != upd[j].Hint {
			return fmt.Errorf("update result %d = %s/%q, want %s/%q", j, r.Entry.GetId(), r.Entry.GetHint(), upd[j].Id, upd[j].Hint)
		}
		ids[j] = upd[j].Id
	}
	// Reversed, so order is checked against the input, not creation.
	for l, r := 0, n-1; l < r; l, r = l+1, r-1 {
		ids[l], ids[r] = ids[r], ids[l]
	}
	deleted, err := c.DeleteEntries(ctx, ids)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if len(deleted) != n {
		return fmt.Errorf("delete: %d results for %d IDs", len(deleted), n)
	}
	for j, r := range deleted {
		if r.Err != nil || r.ID != ids[j] {
			return fmt.Errorf("delete result %d = %s, %v; want %s, nil", j, r.ID, r.Err, ids[j])
		}
	}
	return nil
}

// TestBatchingBoundedByMaxBatch holds the first inner call until 200 callers
// have queued behind it, then checks how they were cut into batches.
func TestBatchingBoundedByMaxBatch(t *testing.T) {
	const callers, maxBatch = 200, 50
	c, rec, srv := newBatching(t, true, BatchingOptions{MaxBatch: maxBatch, Linger: time.Hour})
	ctx := context.Background()

	first := goCreate(ctx, c, entry("/first"))
	rec.waitEntered(t)
	chans := make([]<-chan result, callers)
	wantItems := 1
	for i := range chans {
		// 1 to 3 items, so batches cannot always be filled exactly.
		es := make([]*types.Entry, 1+i%3)
		for j := range es {
			es[j] = entry(fmt.Sprintf("/c/%d/%d", i, j))
		}
		wantItems += len(es)
		chans[i] = goCreate(ctx, c, es...)
	}
	waitCalls(t, c, callers+1)

	// Full batches went out while the first call was held; the remainder
	// waits for it (Linger is an hour). Release every call from now on.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case rec.gate <- struct{}{}:
			case <-stop:
				return
			}
		}
	}()
	if r := await(t, first); r.err != nil {
		t.Fatalf("first caller: %v", r.err)
	}
	for i, ch := range chans {
		r := await(t, ch)
		if r.err != nil {
			t.Fatalf("caller %d: %v", i, r.err)
		}
		for j, er := range r.res {
			if want := fmt.Sprintf("/c/%d/%d", i, j); er.Err != nil || er.Entry.GetSpiffeId().GetPath() != want {
				t.Errorf("caller %d result %d = %v, %v; want %s", i, j, er.Entry.GetSpiffeId(), er.Err, want)
			}
		}
	}

	calls := rec.recorded()
	total, short := 0, 0
	for i, rc := range calls {
		total += rc.items
		if rc.items > maxBatch {
			t.Errorf("inner call %d carries %d items, more than MaxBatch %d", i, rc.items, maxBatch)
		}
		// Callers of 1 to 3 items leave at most 2 slots of a full batch
		// unused; only the lone first call and the remainder are shorter.
		if rc.items < maxBatch-2 {
			short++
		}
	}
	if short > 2 {
		t.Errorf("%d inner calls carry fewer than %d items: batches were flushed early (%+v)", short, maxBatch-2, calls)
	}
	if total != wantItems || len(srv.Entries()) != wantItems {
		t.Errorf("inner calls carried %d items and server has %d entries, want %d", total, len(srv.Entries()), wantItems)
	}
	if minCalls := 1 + (wantItems-1+maxBatch-1)/maxBatch; len(calls) < minCalls || len(calls) > minCalls+2 {
		t.Errorf("%d inner calls for %d items, want about %d", len(calls), wantItems, minCalls)
	}
}

// TestBatchingLoneCallIsImmediate checks that a call finding the inner client
// idle makes exactly one RPC at once, however long Linger is.
func TestBatchingLoneCallIsImmediate(t *testing.T) {
	c, _, srv := newBatching(t, false, BatchingOptions{Linger: time.Hour})
	ctx := context.Background()
	for i := range 3 {
		start := time.Now()
		res, err := c.CreateEntries(ctx, []*types.Entry{entry(fmt.Sprintf("/lone/%d", i))})
		if err != nil || len(res) != 1 || res[0].Err != nil {
			t.Fatalf("CreateEntries = %v, %v", res, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("lone call took %v: it waited for Linger", d)
		}
		if n := srv.Calls(spiretest.MethodBatchCreateEntry); n != i+1 {
			t.Fatalf("after %d lone calls the server saw %d BatchCreateEntry RPCs", i+1, n)
		}
	}
	// A nil mask (every field) works through the batcher too.
	e := srv.Entries()[0]
	e.Hint = "all-fields"
	if res, err := c.UpdateEntries(ctx, []*types.Entry{e}, nil); err != nil || res[0].Err != nil || res[0].Entry.GetHint() != "all-fields" {
		t.Fatalf("update with a nil mask = %v, %v", res, err)
	}
	if n := srv.Calls(spiretest.MethodBatchUpdateEntry); n != 1 {
		t.Fatalf("lone update made %d RPCs, want 1", n)
	}
	start := time.Now()
	if _, err := c.DeleteEntries(ctx, []string{"missing"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second || srv.Calls(spiretest.MethodBatchDeleteEntry) != 1 {
		t.Fatalf("lone delete took %v and %d RPCs", d, srv.Calls(spiretest.MethodBatchDeleteEntry))
	}
}

// TestBatchingLingerFlushesWhileBusy checks that a batch waiting behind a slow
// inner call is sent once Linger passes, without waiting for that call.
func TestBatchingLingerFlushesWhileBusy(t *testing.T) {
	c, rec, _ := newBatching(t, true, BatchingOptions{Linger: 20 * time.Millisecond})
	ctx := context.Background()
	first := goCreate(ctx, c, entry("/slow"))
	rec.waitEntered(t)
	second := goCreate(ctx, c, entry("/lingering"))
	// The second batch reaches the inner client although the first is held.
	rec.waitEntered(t)
	rec.release(t)
	rec.release(t)
	for _, ch := range []<-chan result{first, second} {
		if r := await(t, ch); r.err != nil || r.res[0].Err != nil {
			t.Fatalf("caller: %v %v", r.err, r.res)
		}
	}
}

// TestBatchingAlreadyExists coalesces callers whose entries partly exist and
// checks each ALREADY_EXISTS, with the existing entry, reaches its caller.
func TestBatchingAlreadyExists(t *testing.T) {
	c, rec, srv := newBatching(t, true, BatchingOptions{Linger: time.Hour})
	existing := entry("/existing")
	existing.Id = "existing-1"
	srv.SetEntries(existing)
	ctx := context.Background()

	first := goCreate(ctx, c, entry("/first"))
	rec.waitEntered(t)
	a := goCreate(ctx, c, entry("/a"), entry("/existing"))
	waitCalls(t, c, 2)
	b := goCreate(ctx, c, entry("/existing"), entry("/b"))
	waitCalls(t, c, 3)
	// Same entry as a's first: the server sees it twice in one batch.
	d := goCreate(ctx, c, entry("/a"))
	waitCalls(t, c, 4)
	rec.release(t) // first
	rec.release(t) // a, b and d together
	if r := await(t, first); r.err != nil || r.res[0].Err != nil {
		t.Fatalf("first: %v %v", r.err, r.res)
	}

	ra, rb, rd := await(t, a), await(t, b), await(t, d)
	for name, r := range map[string]result{"a": ra, "b": rb, "d": rd} {
		if r.err != nil {
			t.Fatalf("caller %s: %v", name, r.err)
		}
	}
	if calls := rec.recorded(); len(calls) != 2 || calls[1].items != 5 {
		t.Fatalf("inner calls = %+v, want 2 with the second carrying 5 items", calls)
	}
	check := func(name string, r EntryResult, wantCode codes.Code, wantPath, wantID string) {
		t.Helper()
		if got := status.Code(r.Err); got != wantCode {
			t.Errorf("%s: code %v, want %v (%v)", name, got, wantCode, r.Err)
		}
		if got := r.Entry.GetSpiffeId().GetPath(); got != wantPath {
			t.Errorf("%s: entry for %q, want %q", name, got, wantPath)
		}
		if wantID != "" && r.Entry.GetId() != wantID {
			t.Errorf("%s: entry ID %q, want %q", name, r.Entry.GetId(), wantID)
		}
	}
	check("a[0]", ra.res[0], codes.OK, "/a", "")
	check("a[1]", ra.res[1], codes.AlreadyExists, "/existing", "existing-1")
	check("b[0]", rb.res[0], codes.AlreadyExists, "/existing", "existing-1")
	check("b[1]", rb.res[1], codes.OK, "/b", "")
	check("d[0]", rd.res[0], codes.AlreadyExists, "/a", ra.res[0].Entry.GetId())
}

// TestBatchingRPCErrorFailsOnlyItsBatch fails one inner RPC and checks that
// only the callers whose items were in it see the error.
func TestBatchingRPCErrorFailsOnlyItsBatch(t *testing.T) {
	c, rec, srv := newBatching(t, true, BatchingOptions{Linger: time.Hour})
	ctx := context.Background()

	a := goCreate(ctx, c, entry("/a"))
	rec.waitEntered(t)
	b := goCreate(ctx, c, entry("/b"))
	waitCalls(t, c, 2)
	d := goCreate(ctx, c, entry("/d1"), entry("/d2"))
	waitCalls(t, c, 3)
	rec.release(t) // a
	if r := await(t, a); r.err != nil {
		t.Fatalf("a: %v", r.err)
	}
	// b and d are now in the inner call held at the gate; e and f queue
	// behind it.
	rec.waitEntered(t)
	srv.FailNext(spiretest.MethodBatchCreateEntry, 1, codes.Unavailable)
	e := goCreate(ctx, c, entry("/e"))
	waitCalls(t, c, 4)
	f := goCreate(ctx, c, entry("/f"))
	waitCalls(t, c, 5)
	rec.release(t) // b and d: fails
	rec.release(t) // e and f
	for name, ch := range map[string]<-chan result{"b": b, "d": d} {
		if r := await(t, ch); !IsUnavailable(r.err) || len(r.res) != 0 {
			t.Errorf("%s = %d results, %v; want none and UNAVAILABLE", name, len(r.res), r.err)
		}
	}
	for name, ch := range map[string]<-chan result{"e": e, "f": f} {
		if r := await(t, ch); r.err != nil || len(r.res) != 1 || r.res[0].Err != nil {
			t.Errorf("%s = %v, %v; want success", name, r.res, r.err)
		}
	}
	if got := entryPaths(srv.Entries()); len(got) != 3 {
		t.Errorf("server has %v, want /a, /e and /f", got)
	}
}

// partialClient answers the first k items of a call and fails the rest, as
// Client does when a later sub-batch fails.
type partialClient struct {
	EntryClient
	k int
}

func (p partialClient) CreateEntries(ctx context.Context, es []*types.Entry) ([]EntryResult, error) {
	res, err := p.EntryClient.CreateEntries(ctx, es[:min(p.k, len(es))])
	if err != nil {
		return nil, err
	}
	return res, status.Error(codes.Internal, "later sub-batch failed")
}

// TestBatchingPartialResults checks how a prefix of results returned with an
// error is shared out: covered callers succeed, the straddling one gets its
// prefix and the error, the rest the error alone.
func TestBatchingPartialResults(t *testing.T) {
	srv := spiretest.New(t)
	rec := newRecorder(partialClient{EntryClient: newClient(t, srv), k: 4}, true)
	c := NewBatchingClient(rec, BatchingOptions{Linger: time.Hour})
	t.Cleanup(c.Close)
	ctx := context.Background()

	first := goCreate(ctx, c, entry("/first"))
	rec.waitEntered(t)
	a := goCreate(ctx, c, entry("/a1"), entry("/a2"))
	waitCalls(t, c, 2)
	b := goCreate(ctx, c, entry("/b1"), entry("/b2"), entry("/b3"))
	waitCalls(t, c, 3)
	d := goCreate(ctx, c, entry("/d1"))
	waitCalls(t, c, 4)
	rec.release(t)
	if r := await(t, first); r.err != nil || len(r.res) != 1 {
		t.Fatalf("first = %v, %v; want its result and no error", r.res, r.err)
	}
	rec.release(t)
	if r := await(t, a); r.err != nil || len(r.res) != 2 {
		t.Errorf("a = %d results, %v; want 2 and no error", len(r.res), r.err)
	}
	if r := await(t, b); status.Code(r.err) != codes.Internal || len(r.res) != 2 || r.res[1].Entry.GetSpiffeId().GetPath() != "/b2" {
		t.Errorf("b = %v, %v; want results for /b1 and /b2 and INTERNAL", r.res, r.err)
	}
	if r := await(t, d); status.Code(r.err) != codes.Internal || len(r.res) != 0 {
		t.Errorf("d = %v, %v; want no results and INTERNAL", r.res, r.err)
	}
}

// TestBatchingUpdateMasks checks that only updates with an identical mask
// share an inner call, and that a mask reused by its caller is not affected.
func TestBatchingUpdateMasks(t *testing.T) {
	c, rec, srv := newBatching(t, true, BatchingOptions{Linger: time.Hour})
	var seed []*types.Entry
	for i := range 4 {
		e := entry(fmt.Sprintf("/u/%d", i))
		e.Id = fmt.Sprintf("id-%d", i)
		seed = append(seed, e)
	}
	srv.SetEntries(seed...)
	ctx := context.Background()
	goUpdate := func(id string, mask *types.EntryMask) <-chan result {
		ch := make(chan result, 1)
		go func() {
			res, err := c.UpdateEntries(ctx, []*types.Entry{{Id: id, Hint: "h-" + id, Admin: true}}, mask)
			ch <- result{res, err}
		}()
		return ch
	}

	hint := &types.EntryMask{Hint: true}
	first := goUpdate("id-0", hint)
	rec.waitEntered(t)
	a := goUpdate("id-1", &types.EntryMask{Hint: true})
	waitCalls(t, c, 2)
	// Another mask: its batcher is idle, so it goes at once.
	b := goUpdate("id-2", &types.EntryMask{Hint: true, Admin: true})
	rec.waitEntered(t)
	d := goUpdate("id-3", &types.EntryMask{Hint: true})
	waitCalls(t, c, 4)
	hint.Admin = true // the caller's reuse must not leak into queued batches
	for range 3 {
		rec.release(t)
	}
	for name, ch := range map[string]<-chan result{"first": first, "a": a, "b": b, "d": d} {
		if r := await(t, ch); r.err != nil || r.res[0].Err != nil {
			t.Fatalf("%s: %v %v", name, r.err, r.res)
		}
	}
	calls := rec.recorded()
	if len(calls) != 3 || calls[2].items != 2 || !proto.Equal(calls[2].mask, &types.EntryMask{Hint: true}) {
		t.Fatalf("inner calls = %+v; want id-1 and id-3 together under the hint mask", calls)
	}
	for _, e := range srv.Entries() {
		wantAdmin := e.Id == "id-2"
		if e.Hint != "h-"+e.Id || e.Admin != wantAdmin {
			t.Errorf("entry %s: hint %q admin %v; want h-%s admin %v", e.Id, e.Hint, e.Admin, e.Id, wantAdmin)
		}
	}
	all, _ := maskKey(nil)
	none, _ := maskKey(&types.EntryMask{})
	if all == none {
		t.Error("a nil mask (all fields) and an empty mask (no fields) share a key")
	}
}

// TestBatchingCancelledCaller checks that a caller whose context ends returns
// at once with ctx.Err() while the batch it joined completes for the others.
func TestBatchingCancelledCaller(t *testing.T) {
	c, rec, srv := newBatching(t, true, BatchingOptions{Linger: time.Hour})
	first := goCreate(context.Background(), c, entry("/first"))
	rec.waitEntered(t)
	ctx, cancel := context.WithCancel(context.Background())
	gone := goCreate(ctx, c, entry("/gone"))
	waitCalls(t, c, 2)
	stays := goCreate(context.Background(), c, entry("/stays"))
	waitCalls(t, c, 3)

	cancel()
	if r := await(t, gone); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled caller = %v, want context.Canceled", r.err)
	}
	rec.release(t)
	rec.release(t)
	if r := await(t, first); r.err != nil {
		t.Fatal(r.err)
	}
	if r := await(t, stays); r.err != nil || r.res[0].Err != nil {
		t.Fatalf("other caller of the batch: %v %v", r.err, r.res)
	}
	// The cancelled caller's item was sent with the batch it had joined.
	if n := len(srv.Entries()); n != 3 {
		t.Errorf("server has %d entries, want 3", n)
	}
	// A context that is already done is not even queued.
	if _, err := c.CreateEntries(ctx, []*types.Entry{entry("/never")}); !errors.Is(err, context.Canceled) {
		t.Errorf("call with a done context = %v, want context.Canceled", err)
	}
}

// TestBatchingInputChecks covers calls that never reach the inner client.
func TestBatchingInputChecks(t *testing.T) {
	c, rec, _ := newBatching(t, false, BatchingOptions{})
	ctx := context.Background()
	if res, err := c.CreateEntries(ctx, nil); res != nil || err != nil {
		t.Errorf("empty create = %v, %v", res, err)
	}
	if res, err := c.UpdateEntries(ctx, nil, nil); res != nil || err != nil {
		t.Errorf("empty update = %v, %v", res, err)
	}
	if res, err := c.DeleteEntries(ctx, nil); res != nil || err != nil {
		t.Errorf("empty delete = %v, %v", res, err)
	}
	if _, err := c.CreateEntries(ctx, []*types.Entry{entry("/x"), nil}); err == nil {
		t.Error("create with a nil entry succeeded")
	}
	if _, err := c.UpdateEntries(ctx, []*types.Entry{nil}, nil); err == nil {
		t.Error("update with a nil entry succeeded")
	}
	if n := len(rec.recorded()); n != 0 {
		t.Errorf("%d inner calls, want none", n)
	}
}

// TestBatchingCloseNoLeaks closes a client with calls in flight and queued and
// checks who gets what, and that every goroutine it started has ended.
func TestBatchingCloseNoLeaks(t *testing.T) {
	srv := spiretest.New(t)
	inner := newClient(t, srv)
	// Warm the connection up so its goroutines are part of the baseline.
	if _, err := inner.ListEntries(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()

	rec := newRecorder(inner, true)
	c := NewBatchingClient(rec, BatchingOptions{Linger: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(ran)
	}()

	inFlight := goCreate(context.Background(), c, entry("/in-flight"))
	rec.waitEntered(t)
	queued := goCreate(context.Background(), c, entry("/queued"))
	waitCalls(t, c, 2)
	// An update is another kind, so it goes out at once and is in flight too.
	otherKind := make(chan result, 1)
	go func() {
		res, err := c.UpdateEntries(context.Background(), []*types.Entry{{Id: "x"}}, &types.EntryMask{Hint: true})
		otherKind <- result{res, err}
	}()
	rec.waitEntered(t)

	cancel() // Run closes the client
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if r := await(t, inFlight); status.Code(r.err) != codes.Canceled && !errors.Is(r.err, context.Canceled) {
		t.Errorf("in-flight caller = %v, want cancellation", r.err)
	}
	if r := await(t, queued); !errors.Is(r.err, ErrClosed) {
		t.Errorf("queued caller = %v, want ErrClosed", r.err)
	}
	if r := await(t, otherKind); r.err == nil {
		t.Error("in-flight update succeeded after Close")
	}
	if _, err := c.CreateEntries(context.Background(), []*types.Entry{entry("/late")}); !errors.Is(err, ErrClosed) {
		t.Errorf("create after Close = %v, want ErrClosed", err)
	}
	if _, err := c.DeleteEntries(context.Background(), []string{"x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("delete after Close = %v, want ErrClosed", err)
	}
	c.Close() // again: a no-op

	// Goroutines of the test's own callers and of fired timers end shortly
	// after; poll rather than sleep.
	deadline := time.Now().Add(5 * time.Second)
	after := runtime.NumGoroutine()
	for after > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		after = runtime.NumGoroutine()
	}
	if after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after Close:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// TestBatchingSpreadsAnIdleCall checks that a call finding its kind idle is
// split into Spread inner calls that run at the same time, and that its
// caller gets all results back in input order.
func TestBatchingSpreadsAnIdleCall(t *testing.T) {
	c, rec, srv := newBatching(t, true, BatchingOptions{Spread: 3})
	ctx := context.Background()
	es := make([]*types.Entry, 7)
	for i := range es {
		es[i] = entry(fmt.Sprintf("/spread/%d", i))
	}
	ch := goCreate(ctx, c, es...)
	// All three reach the inner client before any of them is released.
	for range 3 {
		rec.waitEntered(t)
	}
	for range 3 {
		rec.release(t)
	}
	r := await(t, ch)
	if r.err != nil || len(r.res) != len(es) {
		t.Fatalf("CreateEntries = %d results, %v; want %d and no error", len(r.res), r.err, len(es))
	}
	for i, er := range r.res {
		if want := fmt.Sprintf("/spread/%d", i); er.Err != nil || er.Entry.GetSpiffeId().GetPath() != want {
			t.Errorf("result %d = %v, %v; want %s", i, er.Entry.GetSpiffeId(), er.Err, want)
		}
	}
	sizes := []int{}
	for _, rc := range rec.recorded() {
		sizes = append(sizes, rc.items)
	}
	if diff := cmp.Diff([]int{2, 2, 3}, sizes, cmpopts.SortSlices(func(a, b int) bool { return a < b })); diff != "" {
		t.Errorf("inner call sizes (-want +got):\n%s", diff)
	}
	if n := len(srv.Entries()); n != len(es) {
		t.Errorf("server has %d entries, want %d", n, len(es))
	}
	if st := c.Stats(); st.Calls != 1 || st.Batches != 3 || st.Items != int64(len(es)) {
		t.Errorf("Stats() = %+v, want 1 call in 3 batches of %d items", st, len(es))
	}
}

// TestBatchingSpreadOfOneNeverSplits checks that Spread 1 sends an idle
// call's items as one inner call, for datastores that serialize writes.
func TestBatchingSpreadOfOneNeverSplits(t *testing.T) {
	c, rec, _ := newBatching(t, false, BatchingOptions{Spread: 1})
	es := []*types.Entry{entry("/one/0"), entry("/one/1"), entry("/one/2")}
	if _, err := c.CreateEntries(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	if calls := rec.recorded(); len(calls) != 1 || calls[0].items != 3 {
		t.Errorf("inner calls = %+v, want one of 3 items", calls)
	}
}

// failFrom fails every create call whose first entry has the given path.
type failFrom struct {
	EntryClient
	path string
}

func (f failFrom) CreateEntries(ctx context.Context, es []*types.Entry) ([]EntryResult, error) {
	if es[0].GetSpiffeId().GetPath() == f.path {
		return nil, status.Error(codes.Unavailable, "this part failed")
	}
	return f.EntryClient.CreateEntries(ctx, es)
}

// TestBatchingSpreadPartFails checks that when one part of a spread call
// fails, its caller gets the results before that part and the part's error,
// the shape every EntryClient returns a partial failure in.
func TestBatchingSpreadPartFails(t *testing.T) {
	srv := spiretest.New(t)
	c := NewBatchingClient(failFrom{EntryClient: newClient(t, srv), path: "/part/2"}, BatchingOptions{Spread: 3})
	t.Cleanup(c.Close)
	es := make([]*types.Entry, 6)
	for i := range es {
		es[i] = entry(fmt.Sprintf("/part/%d", i))
	}
	res, err := c.CreateEntries(context.Background(), es)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("error = %v, want the failed part's UNAVAILABLE", err)
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Entry.GetSpiffeId().GetPath())
	}
	if diff := cmp.Diff([]string{"/part/0", "/part/1"}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}
