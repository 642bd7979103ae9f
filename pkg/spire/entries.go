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
	"sync"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
)

// EntryResult is the outcome of creating or updating one entry.
type EntryResult struct {
	// Entry is the entry as echoed by the server: set on success and, for a
	// create that fails with ALREADY_EXISTS because a similar entry (same
	// SPIFFE ID, parent ID and selector set) exists, set to that existing
	// entry. Nil on any other failure, including ALREADY_EXISTS caused by a
	// caller-chosen ID that is already taken.
	Entry *types.Entry
	// Err is nil when the item's status is OK, an *ItemError otherwise.
	Err error
}

// ListedEntryFields returns the fields ListEntries asks for: every field the
// controller writes, compares, keys entries on or decides ownership by, plus
// the creation time (the oldest of duplicates is kept) and the revision
// number (a resync's list is merged with concurrent writes by it). An
// entry's expiry and SPIRE 1.15's additional attributes are neither declared
// nor compared, so they are not sent. A server that does not know a field
// ignores its bit. The reconciler's table of entry fields says which are
// listed; its tests check this mask against it.
func ListedEntryFields() *types.EntryMask {
	return &types.EntryMask{
		SpiffeId:       true,
		ParentId:       true,
		Selectors:      true,
		X509SvidTtl:    true,
		FederatesWith:  true,
		Admin:          true,
		Downstream:     true,
		DnsNames:       true,
		RevisionNumber: true,
		StoreSvid:      true,
		JwtSvidTtl:     true,
		Hint:           true,
		CreatedAt:      true,
	}
}

// ListEntries returns all registration entries, paging through the server
// PageSize entries at a time. Entries carry the fields of ListedEntryFields:
// not their expiry nor their additional attributes. On any error, including
// one on a later page, it returns the error and no entries.
func (c *Client) ListEntries(ctx context.Context) ([]*types.Entry, error) {
	return listAll(ctx, "ListEntries", "list entries", c.listEntriesPage)
}

// ListEntryPages lists every entry as ListEntries does, handing each page to page as it
// arrives (see EntryPageLister).
func (c *Client) ListEntryPages(ctx context.Context, page func([]*types.Entry) error) error {
	return eachPage(ctx, "ListEntries", "list entries", c.listEntriesPage, page)
}

func (c *Client) listEntriesPage(ctx context.Context, token string) ([]*types.Entry, string, error) {
	resp, err := c.entries.ListEntries(ctx, &entryv1.ListEntriesRequest{
		PageSize:   c.pageSize(),
		PageToken:  token,
		OutputMask: ListedEntryFields(),
	})
	return resp.GetEntries(), resp.GetNextPageToken(), err
}

// CreateEntries creates entries in batches of at most BatchSize and returns
// one result per entry in input order. Entries without an ID get one from
// the server. An RPC-level failure is returned as the error together with
// the results of the batches completed before it (a prefix of entries);
// see EntryResult for how ALREADY_EXISTS is reported.
func (c *Client) CreateEntries(ctx context.Context, entries []*types.Entry) ([]EntryResult, error) {
	if err := noNil(entries, "entry"); err != nil {
		return nil, fmt.Errorf("create entries: %w", err)
	}
	return inBatches(ctx, "BatchCreateEntry", "create entries", c.batchSize(), entries,
		func(ctx context.Context, batch []*types.Entry) ([]*entryv1.BatchCreateEntryResponse_Result, error) {
			resp, err := c.entries.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: batch})
			return resp.GetResults(), err
		},
		func(e *types.Entry, r *entryv1.BatchCreateEntryResponse_Result) EntryResult {
			return EntryResult{Entry: r.GetEntry(), Err: itemErr("create entry", entryKey(e), r.GetStatus())}
		})
}

// UpdateEntries updates entries, matched by ID, in batches of at most
// BatchSize and returns one result per entry in input order. mask selects
// the fields to write; nil writes every field, so unset fields are cleared.
// Errors and partial results are as for CreateEntries; a missing ID fails
// the item with NOT_FOUND.
func (c *Client) UpdateEntries(ctx context.Context, entries []*types.Entry, mask *types.EntryMask) ([]EntryResult, error) {
	if err := noNil(entries, "entry"); err != nil {
		return nil, fmt.Errorf("update entries: %w", err)
	}
	return inBatches(ctx, "BatchUpdateEntry", "update entries", c.batchSize(), entries,
		func(ctx context.Context, batch []*types.Entry) ([]*entryv1.BatchUpdateEntryResponse_Result, error) {
			resp, err := c.entries.BatchUpdateEntry(ctx, &entryv1.BatchUpdateEntryRequest{Entries: batch, InputMask: mask})
			return resp.GetResults(), err
		},
		func(e *types.Entry, r *entryv1.BatchUpdateEntryResponse_Result) EntryResult {
			return EntryResult{Entry: r.GetEntry(), Err: itemErr("update entry", entryKey(e), r.GetStatus())}
		})
}

// DeleteEntries deletes entries by ID in batches of at most BatchSize and
// returns one result per ID in input order; an ID that does not exist fails
// with NOT_FOUND (see IsNotFound). Errors and partial results are as for
// CreateEntries.
func (c *Client) DeleteEntries(ctx context.Context, ids []string) ([]DeleteResult, error) {
	return inBatches(ctx, "BatchDeleteEntry", "delete entries", c.batchSize(), ids,
		func(ctx context.Context, batch []string) ([]*entryv1.BatchDeleteEntryResponse_Result, error) {
			resp, err := c.entries.BatchDeleteEntry(ctx, &entryv1.BatchDeleteEntryRequest{Ids: batch})
			return resp.GetResults(), err
		},
		func(id string, r *entryv1.BatchDeleteEntryResponse_Result) DeleteResult {
			return DeleteResult{ID: id, Err: itemErr("delete entry", id, r.GetStatus())}
		})
}

// entryKey names an entry in errors: its ID, or its SPIFFE ID before the
// server has assigned one.
func entryKey(e *types.Entry) string {
	if e.GetId() != "" {
		return e.GetId()
	}
	if id := e.GetSpiffeId(); id != nil {
		return "spiffe://" + id.GetTrustDomain() + id.GetPath()
	}
	return ""
}

// Client's entry calls above send what they are given. BatchingClient, below, is what the
// controllers write through: it joins the writes of concurrent callers into shared calls.

// DefaultLinger is how long a batch waits for more calls to join it while an
// inner call of its kind is already running. It bounds the delay batching
// adds to any one call; a call that finds the inner client idle is not
// delayed at all.
const DefaultLinger = 2 * time.Millisecond

// DefaultSpread is how many concurrent inner calls a call that finds its kind
// idle is split into. SPIRE writes the entries of one request one after the
// other, each in a transaction of its own; a PostgreSQL or MySQL datastore
// runs concurrent transactions in parallel, so a pod's K entries land in
// about the time of K/spread creates instead of K. Measured here on SPIRE
// 1.15.3 with 10 entries a call: PostgreSQL p50 29 ms as one call, 15 ms as
// five; sqlite, which serializes its writes, 8.4 ms either way.
const DefaultSpread = 5

// ErrClosed is returned by the write methods of a BatchingClient after Close,
// and to callers whose items were still waiting for a batch when it closed.
var ErrClosed = errors.New("spire batching client is closed")

// BatchingOptions configures NewBatchingClient. The zero value gives the
// defaults.
type BatchingOptions struct {
	// MaxBatch is the most items coalesced from several callers into one
	// inner call; values <= 0 mean DefaultBatchSize, the size SPIRE's
	// requests are bounded to. A single call with more items than this is
	// sent on its own, and the inner client bounds its RPCs.
	MaxBatch int
	// Linger is the longest a batch accumulates calls while an inner call of
	// the same kind is running; values <= 0 mean DefaultLinger.
	Linger time.Duration
	// Spread is the most concurrent inner calls a call's items are split
	// into when it finds no inner call of its kind running; values <= 0 mean
	// DefaultSpread, and 1 never splits. Calls that join a pending batch are
	// never split: under load the batches, not the spread, keep SPIRE busy.
	Spread int
}

// BatchingStats counts a BatchingClient's write traffic since it was made.
type BatchingStats struct {
	// Calls is the number of non-empty write calls accepted from callers.
	Calls int64
	// Batches is the number of write calls made to the inner client.
	Batches int64
	// Items is the number of items those inner calls carried.
	Items int64
}

// BatchingClient is an EntryClient that coalesces the small writes of
// concurrent callers — typically the workers of a controller, each syncing
// one pod with a handful of entries — into few large inner calls, so that bulk
// work runs near the SPIRE server's batch throughput instead of paying one
// round trip and one datastore transaction per pod.
//
// Each write kind (create, delete, and update per distinct mask, since SPIRE
// takes one mask per batch) is batched on its own:
//
//   - A call that finds no inner call of its kind running is sent at once,
//     alone: a lone event is never delayed. Its items are split over up to
//     Spread concurrent inner calls, so that a datastore that writes in
//     parallel serves one pod's entries in parallel too.
//   - Otherwise it joins the pending batch of its kind, which is sent when
//     the running inner call returns, when Linger has passed since the batch
//     started, or when it holds MaxBatch items, whichever comes first. The
//     inner call's round trip is the natural window in which the next batch
//     fills up; Linger only caps the wait when that round trip is slow.
//
// A caller's items are never split across batches other than by the spread of
// an idle kind, and every caller gets the results of exactly its own items, in
// its input order. When an inner call
// fails, only the callers whose items were in that batch see the error; as
// with Client, a caller whose items all received results before the failure
// gets them without error, and one whose items were partly answered gets that
// prefix together with the error.
//
// Inner calls do not run under any caller's context, since they carry other
// callers' items too: a caller whose context ends returns ctx.Err() at once
// while its items may still be sent. Inner calls end when Close is called.
//
// ListEntries is not batched; it is passed straight to the inner client.
type BatchingClient struct {
	inner    EntryClient
	maxBatch int
	linger   time.Duration
	spread   int

	// base bounds every inner call; Close cancels it.
	base   context.Context
	cancel context.CancelFunc
	// inflight counts the goroutines running inner calls, so Close can wait
	// for them.
	inflight sync.WaitGroup

	// mu guards everything below and the state of every batcher: one lock
	// for all kinds keeps Close atomic, and the critical sections are a few
	// slice appends, far cheaper than the RPCs they save.
	mu      sync.Mutex
	closed  bool
	stats   BatchingStats
	creates *batcher[*types.Entry, EntryResult]
	deletes *batcher[string, DeleteResult]
	// updates holds one batcher per distinct mask, keyed by maskKey. It only
	// grows, but a controller uses a handful of masks.
	updates map[string]*batcher[*types.Entry, EntryResult]
}

var _ EntryClient = (*BatchingClient)(nil)

// NewBatchingClient returns a client that coalesces concurrent writes into
// calls to inner. It starts no goroutine until a write is made; call Close (or
// Run) to end inner calls in flight and release it. Close does not close
// inner, which the caller keeps owning.
func NewBatchingClient(inner EntryClient, opts BatchingOptions) *BatchingClient {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultBatchSize
	}
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Spread <= 0 {
		opts.Spread = DefaultSpread
	}
	base, cancel := context.WithCancel(context.Background())
	c := &BatchingClient{
		inner:    inner,
		maxBatch: opts.MaxBatch,
		linger:   opts.Linger,
		spread:   opts.Spread,
		base:     base,
		cancel:   cancel,
		updates:  map[string]*batcher[*types.Entry, EntryResult]{},
	}
	c.creates = &batcher[*types.Entry, EntryResult]{client: c, send: inner.CreateEntries}
	c.deletes = &batcher[string, DeleteResult]{client: c, send: inner.DeleteEntries}
	return c
}

// Run blocks until ctx is done, then closes the client. It lets the client's
// lifetime be tied to a controller's context the way informers and workers
// are; using the client does not require it.
func (c *BatchingClient) Run(ctx context.Context) {
	<-ctx.Done()
	c.Close()
}

// Close stops the client: later writes fail with ErrClosed, calls still
// waiting in a pending batch fail with ErrClosed without being sent, and
// inner calls in flight are cancelled. It returns once every goroutine the
// client started has ended. It is safe to call more than once.
func (c *BatchingClient) Close() {
	c.abandon()
	c.cancel()
	c.inflight.Wait()
}

// Drain stops the client as Close does, except that inner calls in flight are
// seen through, not cancelled: SPIRE may already be applying them, and
// cancelling only stops the caller from hearing the outcome. A leader drains
// before it gives up its lease, so that no write of its own lands after the
// next leader's first. Each call is bounded by the inner client's deadline.
func (c *BatchingClient) Drain() {
	c.abandon()
	c.inflight.Wait()
	c.cancel()
}

// abandon refuses later writes and fails the calls of the pending batches.
func (c *BatchingClient) abandon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.creates.abandon()
	c.deletes.abandon()
	for _, b := range c.updates {
		b.abandon()
	}
}

// Stats returns the write traffic counted so far.
func (c *BatchingClient) Stats() BatchingStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// ListEntries lists every entry through the inner client.
func (c *BatchingClient) ListEntries(ctx context.Context) ([]*types.Entry, error) {
	return c.inner.ListEntries(ctx)
}

// ListEntryPages lists every entry page by page through the inner client.
func (c *BatchingClient) ListEntryPages(ctx context.Context, page func([]*types.Entry) error) error {
	return ListEntryPages(ctx, c.inner, page)
}

// CreateEntries creates entries as part of a batch shared with concurrent
// callers and returns one result per entry in input order, as
// Client.CreateEntries does.
func (c *BatchingClient) CreateEntries(ctx context.Context, entries []*types.Entry) ([]EntryResult, error) {
	// Checked per caller: a nil item would fail the whole shared RPC.
	if err := noNil(entries, "entry"); err != nil {
		return nil, fmt.Errorf("create entries: %w", err)
	}
	return c.creates.do(ctx, entries)
}

// UpdateEntries updates entries as part of a batch shared with concurrent
// callers that pass an identical mask (nil, meaning every field, is distinct
// from an empty mask) and returns one result per entry in input order, as
// Client.UpdateEntries does.
func (c *BatchingClient) UpdateEntries(ctx context.Context, entries []*types.Entry, mask *types.EntryMask) ([]EntryResult, error) {
	if err := noNil(entries, "entry"); err != nil {
		return nil, fmt.Errorf("update entries: %w", err)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	key, err := maskKey(mask)
	if err != nil {
		return nil, fmt.Errorf("update entries: %w", err)
	}
	c.mu.Lock()
	b := c.updates[key]
	if b == nil {
		// The batcher keeps its own copy: the caller may reuse its mask.
		m := proto.CloneOf(mask)
		b = &batcher[*types.Entry, EntryResult]{client: c, send: func(ctx context.Context, es []*types.Entry) ([]EntryResult, error) {
			return c.inner.UpdateEntries(ctx, es, m)
		}}
		c.updates[key] = b
	}
	c.mu.Unlock()
	return b.do(ctx, entries)
}

// DeleteEntries deletes entries by ID as part of a batch shared with
// concurrent callers and returns one result per ID in input order, as
// Client.DeleteEntries does.
func (c *BatchingClient) DeleteEntries(ctx context.Context, ids []string) ([]DeleteResult, error) {
	return c.deletes.do(ctx, ids)
}

// maskKey identifies a mask's value. Deterministic marshaling of a message of
// booleans encodes exactly the set fields, so equal masks get equal keys.
func maskKey(mask *types.EntryMask) (string, error) {
	if mask == nil {
		return "all", nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(mask)
	if err != nil {
		return "", fmt.Errorf("encode entry mask: %w", err)
	}
	return "mask:" + string(b), nil
}

// batcher coalesces the calls of one write kind. Its fields are guarded by
// client.mu.
type batcher[In, Out any] struct {
	client *BatchingClient
	send   func(ctx context.Context, items []In) ([]Out, error)

	// running is the number of inner calls of this kind in flight.
	running int
	// pending accumulates calls while running > 0; it is nil otherwise,
	// since a call that finds nothing running is sent at once.
	pending *batch[In, Out]
}

// batch is a set of calls sent together in one inner call.
type batch[In, Out any] struct {
	// ctx is the first caller's context, used for its values (the logger)
	// only: the inner call must outlive any one caller.
	ctx   context.Context
	calls []*call[In, Out]
	items int
	timer *time.Timer
}

// call is one caller's share of a batch. out and err are written before done
// is closed and read only after.
type call[In, Out any] struct {
	items []In
	out   []Out
	err   error
	done  chan struct{}
}

func (b *batcher[In, Out]) do(ctx context.Context, items []In) ([]Out, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	calls, err := b.enqueue(ctx, items)
	if err != nil {
		return nil, err
	}
	for _, cl := range calls {
		select {
		case <-cl.done:
		case <-ctx.Done():
			// Prefer an answer that is already there over the cancellation.
			select {
			case <-cl.done:
			default:
				return nil, ctx.Err()
			}
		}
	}
	return joinResults(calls)
}

// joinResults puts the results of one caller's calls, in item order, back
// together. A failure keeps the documented shape: the results before the first
// item without one, with that call's error.
func joinResults[In, Out any](calls []*call[In, Out]) ([]Out, error) {
	if len(calls) == 1 {
		return calls[0].out, calls[0].err
	}
	var out []Out
	for _, cl := range calls {
		out = append(out, cl.out...)
		if cl.err != nil || len(cl.out) < len(cl.items) {
			return out, cl.err
		}
	}
	return out, nil
}

// enqueue sends items at once, spread, when nothing of their kind runs, and
// adds them to the pending batch otherwise. It returns the calls that carry
// them, in item order.
func (b *batcher[In, Out]) enqueue(ctx context.Context, items []In) ([]*call[In, Out], error) {
	c := b.client
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	c.stats.Calls++
	n := len(items)
	if b.running == 0 {
		// Nothing to wait for: waiting could only add latency.
		calls := spreadCalls[In, Out](items, c.spread)
		for _, cl := range calls {
			b.start(ctx, []*call[In, Out]{cl}, len(cl.items))
		}
		return calls, nil
	}
	cl := &call[In, Out]{items: items, done: make(chan struct{})}
	if p := b.pending; p != nil && p.items+n > c.maxBatch {
		b.flush()
	}
	if n >= c.maxBatch {
		b.start(ctx, []*call[In, Out]{cl}, n)
		return []*call[In, Out]{cl}, nil
	}
	p := b.pending
	if p == nil {
		p = &batch[In, Out]{ctx: ctx}
		p.timer = time.AfterFunc(c.linger, func() { b.lingered(p) })
		b.pending = p
	}
	p.calls = append(p.calls, cl)
	p.items += n
	if p.items >= c.maxBatch {
		b.flush()
	}
	return []*call[In, Out]{cl}, nil
}

// spreadCalls splits items into up to spread calls of nearly equal size, in
// order.
func spreadCalls[In, Out any](items []In, spread int) []*call[In, Out] {
	parts := min(spread, len(items))
	calls := make([]*call[In, Out], 0, parts)
	for i := range parts {
		lo, hi := i*len(items)/parts, (i+1)*len(items)/parts
		calls = append(calls, &call[In, Out]{items: items[lo:hi:hi], done: make(chan struct{})})
	}
	return calls
}

// lingered sends p if it is still waiting when its linger time is up.
func (b *batcher[In, Out]) lingered(p *batch[In, Out]) {
	b.client.mu.Lock()
	defer b.client.mu.Unlock()
	// Sent already, or abandoned by Close.
	if b.pending == p {
		b.flush()
	}
}

// flush sends the pending batch. client.mu must be held.
func (b *batcher[In, Out]) flush() {
	p := b.pending
	b.pending = nil
	p.timer.Stop()
	b.start(p.ctx, p.calls, p.items)
}

// abandon fails the calls of the pending batch with ErrClosed. client.mu
// must be held.
func (b *batcher[In, Out]) abandon() {
	p := b.pending
	if p == nil {
		return
	}
	b.pending = nil
	p.timer.Stop()
	for _, cl := range p.calls {
		cl.err = ErrClosed
		close(cl.done)
	}
}

// start runs one inner call for calls in a new goroutine, so that no caller
// has to stay to see it through. client.mu must be held.
func (b *batcher[In, Out]) start(ctx context.Context, calls []*call[In, Out], items int) {
	c := b.client
	b.running++
	c.stats.Batches++
	c.stats.Items += int64(items)
	c.inflight.Add(1)
	go func() {
		defer c.inflight.Done()
		b.run(ctx, calls, items)
	}()
}

func (b *batcher[In, Out]) run(callerCtx context.Context, calls []*call[In, Out], n int) {
	c := b.client
	items := make([]In, 0, n)
	for _, cl := range calls {
		items = append(items, cl.items...)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(callerCtx))
	stop := context.AfterFunc(c.base, cancel)
	out, err := b.send(ctx, items)
	stop()
	cancel()
	switch {
	case err == nil && len(out) != len(items):
		out, err = nil, fmt.Errorf("inner client returned %d results for %d items", len(out), len(items))
	case len(out) > len(items):
		// A failure must come with a prefix of the results; anything longer
		// cannot be matched to items.
		out = nil
	}

	// Send the batch that filled up meanwhile before handing out results,
	// so its round trip overlaps with this batch's callers resuming.
	c.mu.Lock()
	b.running--
	if b.pending != nil {
		b.flush()
	}
	c.mu.Unlock()

	lo := 0
	for _, cl := range calls {
		hi := lo + len(cl.items)
		switch {
		case hi <= len(out):
			// Every item of this caller has a result: an error that hit a
			// later part of the inner call is not this caller's.
			cl.out = out[lo:hi:hi]
		case lo < len(out):
			cl.out, cl.err = out[lo:len(out):len(out)], err
		default:
			cl.err = err
		}
		close(cl.done)
		lo = hi
	}
}

// BatchedAPI is a whole SPIRE API whose entry writes are coalesced by a BatchingClient and
// whose federation calls, few and rarely concurrent, go straight through.
type BatchedAPI struct {
	*BatchingClient
	FederationClient
}

var _ API = BatchedAPI{}

// NewBatchedAPI wraps inner so that concurrent entry writes share RPCs. Close the returned
// value's BatchingClient when done; inner stays the caller's.
func NewBatchedAPI(inner API, opts BatchingOptions) BatchedAPI {
	return BatchedAPI{BatchingClient: NewBatchingClient(inner, opts), FederationClient: inner}
}
