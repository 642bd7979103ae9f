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
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

const testTD = spiretest.DefaultTrustDomain

// newClient dials srv with fast readiness polling and closes the client
// when the test ends.
func newClient(t *testing.T, srv *spiretest.Server, opts ...grpc.DialOption) *Client {
	t.Helper()
	c, err := Dial(context.Background(), srv.SocketPath(), opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.readyDelay = 10 * time.Millisecond
	c.readyMaxDelay = 100 * time.Millisecond
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// entry builds a valid workload entry for the fake's trust domain.
func entry(path string, selectors ...string) *types.Entry {
	e := &types.Entry{
		SpiffeId: &types.SPIFFEID{TrustDomain: testTD, Path: path},
		ParentId: &types.SPIFFEID{TrustDomain: testTD, Path: "/spire/agent/k8s_psat/node1"},
	}
	if len(selectors) == 0 {
		selectors = []string{"k8s:ns:default"}
	}
	for _, s := range selectors {
		typ, val, _ := strings.Cut(s, ":")
		e.Selectors = append(e.Selectors, &types.Selector{Type: typ, Value: val})
	}
	return e
}

func entries(n int) []*types.Entry {
	out := make([]*types.Entry, n)
	for i := range out {
		out[i] = entry(fmt.Sprintf("/w/%03d", i))
	}
	return out
}

func relationship(td string) *types.FederationRelationship {
	return &types.FederationRelationship{
		TrustDomain:           td,
		BundleEndpointUrl:     "https://" + td + "/bundle",
		BundleEndpointProfile: &types.FederationRelationship_HttpsWeb{HttpsWeb: &types.HTTPSWebProfile{}},
	}
}

func ids(es []*types.Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.GetId())
	}
	sort.Strings(out)
	return out
}

func TestListEntriesPagination(t *testing.T) {
	tests := []struct {
		name      string
		entries   int
		pageSize  int
		wantCalls int
	}{
		{name: "empty", entries: 0, pageSize: 3, wantCalls: 1},
		{name: "partial last page", entries: 7, pageSize: 3, wantCalls: 4},
		{name: "exact pages end with an empty page", entries: 6, pageSize: 3, wantCalls: 3},
		{name: "one page with default size", entries: 5, pageSize: 0, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spiretest.New(t)
			srv.SetEntries(entries(tt.entries)...)
			c := newClient(t, srv)
			c.PageSize = tt.pageSize

			got, err := c.ListEntries(context.Background())
			if err != nil {
				t.Fatalf("ListEntries: %v", err)
			}
			want := srv.Entries()
			if len(got) != len(want) {
				t.Fatalf("got %d entries, want %d", len(got), len(want))
			}
			sort.Slice(got, func(i, j int) bool { return got[i].Id < got[j].Id })
			for i := range want {
				if !proto.Equal(got[i], want[i]) {
					t.Errorf("entry %d = %v, want %v", i, got[i], want[i])
				}
			}
			if n := srv.Calls(spiretest.MethodListEntries); n != tt.wantCalls {
				t.Errorf("ListEntries calls = %d, want %d", n, tt.wantCalls)
			}
		})
	}
}

// TestListEntriesLeavesOutWhatNoReconcilerReads: a listed entry has every field the
// reconciler writes or compares, its creation time and its revision, and not its expiry.
func TestListEntriesLeavesOutWhatNoReconcilerReads(t *testing.T) {
	srv := spiretest.New(t)
	full := entry("/w/full", "k8s:ns:default", "k8s:sa:web")
	full.Id = "full"
	full.X509SvidTtl, full.JwtSvidTtl = 3600, 300
	full.FederatesWith = []string{"other.org"}
	full.Admin, full.Downstream, full.StoreSvid = true, true, true
	full.DnsNames = []string{"web.example"}
	full.Hint = "web"
	full.CreatedAt, full.RevisionNumber = 1700000000, 7
	full.ExpiresAt = 1900000000
	srv.SetEntries(full)
	c := newClient(t, srv)

	got, err := c.ListEntries(context.Background())
	if err != nil {
		t.Fatalf("ListEntries: %v", err)
	}
	want := proto.CloneOf(full)
	want.ExpiresAt = 0
	if len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("listed %v, want %v", got, want)
	}
}

// TestListEntryPagesHandsOverEachPage: the paged listing hands over, page by page, exactly
// what ListEntries returns, and an error of the caller's ends it.
func TestListEntryPagesHandsOverEachPage(t *testing.T) {
	srv := spiretest.New(t)
	srv.SetEntries(entries(7)...)
	c := newClient(t, srv)
	c.PageSize = 3

	var pages [][]*types.Entry
	if err := c.ListEntryPages(context.Background(), func(page []*types.Entry) error {
		pages = append(pages, page)
		return nil
	}); err != nil {
		t.Fatalf("ListEntryPages: %v", err)
	}
	var sizes []int
	var got []*types.Entry
	for _, p := range pages {
		sizes = append(sizes, len(p))
		got = append(got, p...)
	}
	if diff := cmp.Diff([]int{3, 3, 1, 0}, sizes); diff != "" {
		t.Errorf("page sizes (-want +got):\n%s", diff)
	}
	want, err := c.ListEntries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("paged listing (-ListEntries +pages):\n%s", diff)
	}

	srv.ResetCalls()
	stop := errors.New("stop")
	calls := 0
	err = c.ListEntryPages(context.Background(), func([]*types.Entry) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 || srv.Calls(spiretest.MethodListEntries) != 1 {
		t.Errorf("a failing page handler: err %v after %d pages and %d RPCs, want stop after 1 and 1", err, calls,
			srv.Calls(spiretest.MethodListEntries))
	}
}

func TestListEntriesFailsMidPagination(t *testing.T) {
	for _, k := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprintf("after %d pages", k), func(t *testing.T) {
			srv := spiretest.New(t)
			srv.SetEntries(entries(10)...)
			c := newClient(t, srv)
			c.PageSize = 3
			srv.FailListAfterPages(k)

			got, err := c.ListEntries(context.Background())
			if err == nil {
				t.Fatalf("ListEntries succeeded with %d entries, want error", len(got))
			}
			if got != nil {
				t.Errorf("ListEntries returned %d entries with its error, want none", len(got))
			}
			if !IsUnavailable(err) {
				t.Errorf("error %v is not UNAVAILABLE", err)
			}
			if n := srv.Calls(spiretest.MethodListEntries); n != k+1 {
				t.Errorf("ListEntries calls = %d, want %d", n, k+1)
			}

			// The fault fires once; the next listing is complete.
			got, err = c.ListEntries(context.Background())
			if err != nil || len(got) != 10 {
				t.Fatalf("second ListEntries = %d entries, %v; want 10, nil", len(got), err)
			}
		})
	}
}

func TestListEntriesRPCError(t *testing.T) {
	srv := spiretest.New(t)
	srv.SetEntries(entries(2)...)
	c := newClient(t, srv)
	srv.FailNext(spiretest.MethodListEntries, 1, codes.Internal)

	got, err := c.ListEntries(context.Background())
	if status.Code(err) != codes.Internal || got != nil {
		t.Fatalf("ListEntries = %d entries, %v; want none and INTERNAL", len(got), err)
	}
}

func TestCreateEntriesBatching(t *testing.T) {
	tests := []struct {
		name      string
		entries   int
		batchSize int
		wantCalls int
	}{
		{name: "none", entries: 0, batchSize: 2, wantCalls: 0},
		{name: "single batch", entries: 2, batchSize: 2, wantCalls: 1},
		{name: "uneven split", entries: 5, batchSize: 2, wantCalls: 3},
		{name: "default size", entries: 7, batchSize: 0, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spiretest.New(t)
			c := newClient(t, srv)
			c.BatchSize = tt.batchSize
			in := entries(tt.entries)

			res, err := c.CreateEntries(context.Background(), in)
			if err != nil {
				t.Fatalf("CreateEntries: %v", err)
			}
			if len(res) != len(in) {
				t.Fatalf("got %d results, want %d", len(res), len(in))
			}
			for i, r := range res {
				if r.Err != nil {
					t.Errorf("result %d: %v", i, r.Err)
					continue
				}
				if r.Entry.GetId() == "" || r.Entry.GetCreatedAt() == 0 {
					t.Errorf("result %d: server did not assign ID and creation time: %v", i, r.Entry)
				}
				if got, want := r.Entry.GetSpiffeId().GetPath(), in[i].SpiffeId.Path; got != want {
					t.Errorf("result %d is for %s, want %s (order not kept)", i, got, want)
				}
			}
			if n := srv.Calls(spiretest.MethodBatchCreateEntry); n != tt.wantCalls {
				t.Errorf("BatchCreateEntry calls = %d, want %d", n, tt.wantCalls)
			}
			if n := len(srv.Entries()); n != tt.entries {
				t.Errorf("server has %d entries, want %d", n, tt.entries)
			}
		})
	}
}

func TestCreateEntriesPerItemResults(t *testing.T) {
	srv := spiretest.New(t)
	existing := entry("/existing", "k8s:ns:a", "k8s:sa:b")
	existing.Id = "existing-1"
	srv.SetEntries(existing)
	c := newClient(t, srv)
	c.BatchSize = 2

	noSelectors := entry("/no-selectors")
	noSelectors.Selectors = nil
	foreign := entry("/foreign")
	foreign.SpiffeId.TrustDomain = "other.org"
	withID := entry("/custom-id")
	withID.Id = "custom-1"
	takenID := entry("/custom-id-again")
	takenID.Id = "custom-1"
	in := []*types.Entry{
		entry("/ok-1"),
		noSelectors,
		// Same SPIFFE ID, parent and selector set in another order.
		entry("/existing", "k8s:sa:b", "k8s:ns:a"),
		foreign,
		withID,
		takenID,
		entry("/ok-1"),
	}
	type want struct {
		code    codes.Code
		entryID string // "" = no entry echoed, "*" = any non-empty ID
	}
	wants := []want{
		{codes.OK, "*"},
		{codes.InvalidArgument, ""},
		{codes.AlreadyExists, "existing-1"},
		{codes.InvalidArgument, ""},
		{codes.OK, "custom-1"},
		{codes.AlreadyExists, ""},
		{codes.AlreadyExists, "*"},
	}

	res, err := c.CreateEntries(context.Background(), in)
	if err != nil {
		t.Fatalf("CreateEntries: %v", err)
	}
	if len(res) != len(wants) {
		t.Fatalf("got %d results, want %d", len(res), len(wants))
	}
	for i, w := range wants {
		r := res[i]
		if got := status.Code(r.Err); got != w.code {
			t.Errorf("result %d: code %v (%v), want %v", i, got, r.Err, w.code)
		}
		if r.Err != nil {
			var ie *ItemError
			if !errors.As(r.Err, &ie) || ie.Code != w.code || ie.Message == "" {
				t.Errorf("result %d: error %#v is not an *ItemError with code and message", i, r.Err)
			}
		}
		switch gotID := r.Entry.GetId(); {
		case w.entryID == "" && r.Entry != nil:
			t.Errorf("result %d: entry %v, want none", i, r.Entry)
		case w.entryID == "*" && gotID == "":
			t.Errorf("result %d: no entry echoed", i)
		case w.entryID != "" && w.entryID != "*" && gotID != w.entryID:
			t.Errorf("result %d: entry ID %q, want %q", i, gotID, w.entryID)
		}
	}
	if !IsAlreadyExists(res[2].Err) || IsNotFound(res[2].Err) {
		t.Errorf("IsAlreadyExists/IsNotFound misclassify %v", res[2].Err)
	}
	// The duplicate of a same-call creation points at that new entry.
	if res[6].Entry.GetId() != res[0].Entry.GetId() {
		t.Errorf("duplicate echoed %q, want the entry created by item 0 (%q)", res[6].Entry.GetId(), res[0].Entry.GetId())
	}
	if n := srv.Calls(spiretest.MethodBatchCreateEntry); n != 4 {
		t.Errorf("BatchCreateEntry calls = %d, want 4", n)
	}
	if n := len(srv.Entries()); n != 3 {
		t.Errorf("server has %d entries, want 3", n)
	}
}

func TestUpdateEntries(t *testing.T) {
	base := entry("/app", "k8s:ns:a")
	base.Id = "app-1"
	base.Hint = "old"
	base.DnsNames = []string{"app.example.org"}
	base.RevisionNumber = 4
	base.CreatedAt = 1700000000

	tests := []struct {
		name     string
		mutate   func(*types.Entry)
		mask     *types.EntryMask
		wantCode codes.Code
		check    func(t *testing.T, got *types.Entry)
	}{
		{
			name: "mask writes only selected fields",
			mutate: func(e *types.Entry) {
				e.Hint = "new"
				e.DnsNames = nil
				e.SpiffeId = nil // not in the mask, so not needed
			},
			mask: &types.EntryMask{Hint: true},
			check: func(t *testing.T, got *types.Entry) {
				if got.Hint != "new" || len(got.DnsNames) != 1 || got.SpiffeId.GetPath() != "/app" {
					t.Errorf("entry after masked update = %v", got)
				}
			},
		},
		{
			name:   "nil mask writes every field",
			mutate: func(e *types.Entry) { e.Hint = "new"; e.DnsNames = nil },
			check: func(t *testing.T, got *types.Entry) {
				if got.Hint != "new" || len(got.DnsNames) != 0 {
					t.Errorf("entry after full update = %v", got)
				}
			},
		},
		{
			name:     "unknown ID",
			mutate:   func(e *types.Entry) { e.Id = "missing" },
			wantCode: codes.NotFound,
		},
		{
			name:     "invalid field in mask",
			mutate:   func(e *types.Entry) { e.Selectors = nil },
			mask:     &types.EntryMask{Selectors: true},
			wantCode: codes.InvalidArgument,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spiretest.New(t)
			srv.SetEntries(base)
			c := newClient(t, srv)
			in := proto.CloneOf(base)
			tt.mutate(in)

			res, err := c.UpdateEntries(context.Background(), []*types.Entry{in}, tt.mask)
			if err != nil {
				t.Fatalf("UpdateEntries: %v", err)
			}
			if len(res) != 1 {
				t.Fatalf("got %d results, want 1", len(res))
			}
			if got := status.Code(res[0].Err); got != tt.wantCode {
				t.Fatalf("code = %v (%v), want %v", got, res[0].Err, tt.wantCode)
			}
			if tt.wantCode != codes.OK {
				if res[0].Entry != nil {
					t.Errorf("failed update echoed %v", res[0].Entry)
				}
				if !proto.Equal(srv.Entries()[0], base) {
					t.Errorf("failed update changed the entry: %v", srv.Entries()[0])
				}
				return
			}
			if res[0].Entry.RevisionNumber != base.RevisionNumber+1 {
				t.Errorf("revision = %d, want %d", res[0].Entry.RevisionNumber, base.RevisionNumber+1)
			}
			if !proto.Equal(res[0].Entry, srv.Entries()[0]) {
				t.Errorf("echoed %v, server has %v", res[0].Entry, srv.Entries()[0])
			}
			tt.check(t, res[0].Entry)
		})
	}
}

func TestDeleteEntries(t *testing.T) {
	srv := spiretest.New(t)
	in := entries(3)
	for i, e := range in {
		e.Id = fmt.Sprintf("id-%d", i)
	}
	srv.SetEntries(in...)
	c := newClient(t, srv)
	c.BatchSize = 2

	res, err := c.DeleteEntries(context.Background(), []string{"id-0", "missing", "id-2", ""})
	if err != nil {
		t.Fatalf("DeleteEntries: %v", err)
	}
	wantIDs := []string{"id-0", "missing", "id-2", ""}
	wantCodes := []codes.Code{codes.OK, codes.NotFound, codes.OK, codes.InvalidArgument}
	if len(res) != len(wantIDs) {
		t.Fatalf("got %d results, want %d", len(res), len(wantIDs))
	}
	for i := range res {
		if res[i].ID != wantIDs[i] || status.Code(res[i].Err) != wantCodes[i] {
			t.Errorf("result %d = {%q, %v}, want {%q, %v}", i, res[i].ID, res[i].Err, wantIDs[i], wantCodes[i])
		}
	}
	if !IsNotFound(res[1].Err) {
		t.Errorf("IsNotFound(%v) = false", res[1].Err)
	}
	if got := ids(srv.Entries()); len(got) != 1 || got[0] != "id-1" {
		t.Errorf("server entries = %v, want [id-1]", got)
	}
	if n := srv.Calls(spiretest.MethodBatchDeleteEntry); n != 2 {
		t.Errorf("BatchDeleteEntry calls = %d, want 2", n)
	}
}

// failCall returns a client interceptor failing the nth call (1-based) of
// method with code, so a failure can hit a later batch of one operation.
func failCall(method string, nth int, code codes.Code) grpc.DialOption {
	var seen atomic.Int32
	return grpc.WithUnaryInterceptor(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(m, "/"+method) && int(seen.Add(1)) == nth {
			return status.Error(code, "test: injected client-side failure")
		}
		return invoker(ctx, m, req, reply, cc, opts...)
	})
}

func TestBatchRPCErrorReturnsCompletedBatches(t *testing.T) {
	tests := []struct {
		name        string
		failBatch   int
		wantResults int
	}{
		{name: "first batch fails", failBatch: 1, wantResults: 0},
		{name: "second batch fails", failBatch: 2, wantResults: 2},
		{name: "last batch fails", failBatch: 3, wantResults: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spiretest.New(t)
			c := newClient(t, srv, failCall("BatchCreateEntry", tt.failBatch, codes.Unavailable))
			c.BatchSize = 2

			res, err := c.CreateEntries(context.Background(), entries(5))
			if !IsUnavailable(err) {
				t.Fatalf("error = %v, want UNAVAILABLE", err)
			}
			if len(res) != tt.wantResults {
				t.Fatalf("got %d results, want %d", len(res), tt.wantResults)
			}
			for i, r := range res {
				if r.Err != nil || r.Entry.GetSpiffeId().GetPath() != fmt.Sprintf("/w/%03d", i) {
					t.Errorf("result %d = %v, %v", i, r.Entry, r.Err)
				}
			}
			// No batch after the failed one was sent.
			if n := srv.Calls(spiretest.MethodBatchCreateEntry); n != tt.failBatch-1 {
				t.Errorf("server saw %d BatchCreateEntry calls, want %d", n, tt.failBatch-1)
			}
		})
	}
}

func TestWritesWithoutItemsOrWithNilItems(t *testing.T) {
	srv := spiretest.New(t)
	c := newClient(t, srv)
	ctx := context.Background()

	if res, err := c.CreateEntries(ctx, nil); res != nil || err != nil {
		t.Errorf("CreateEntries(nil) = %v, %v", res, err)
	}
	if res, err := c.DeleteEntries(ctx, []string{}); res != nil || err != nil {
		t.Errorf("DeleteEntries([]) = %v, %v", res, err)
	}
	if _, err := c.UpdateEntries(ctx, []*types.Entry{entry("/a"), nil}, nil); err == nil {
		t.Error("UpdateEntries with a nil entry succeeded")
	}
	if _, err := c.CreateFederationRelationships(ctx, []*types.FederationRelationship{nil}); err == nil {
		t.Error("CreateFederationRelationships with a nil relationship succeeded")
	}
	if n := srv.WriteCalls(); n != 0 {
		t.Errorf("server saw %d write calls, want 0", n)
	}
}

func TestFederationRelationships(t *testing.T) {
	srv := spiretest.New(t)
	c := newClient(t, srv)
	c.PageSize = 2
	c.BatchSize = 2
	ctx := context.Background()

	badURL := relationship("bad.org")
	badURL.BundleEndpointUrl = "http://bad.org/bundle"
	in := []*types.FederationRelationship{
		relationship("a.org"), relationship("b.org"), badURL,
		relationship("c.org"), relationship(testTD), relationship("a.org"),
	}
	// SPIRE v1.13 reports an existing relationship as INTERNAL, not the
	// ALREADY_EXISTS its proto documents; the fake does the same.
	wantCodes := []codes.Code{codes.OK, codes.OK, codes.InvalidArgument, codes.OK, codes.InvalidArgument, codes.Internal}
	res, err := c.CreateFederationRelationships(ctx, in)
	if err != nil {
		t.Fatalf("CreateFederationRelationships: %v", err)
	}
	for i, r := range res {
		if status.Code(r.Err) != wantCodes[i] {
			t.Errorf("create result %d: %v, want %v", i, r.Err, wantCodes[i])
		}
		if (r.Err == nil) != (r.Relationship != nil) {
			t.Errorf("create result %d: relationship %v with error %v", i, r.Relationship, r.Err)
		}
	}

	got, err := c.ListFederationRelationships(ctx)
	if err != nil {
		t.Fatalf("ListFederationRelationships: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("listed %d relationships, want 3", len(got))
	}
	// 3 relationships at 2 per page: two pages and a final empty one.
	if n := srv.Calls(spiretest.MethodListFederationRelationships); n != 3 {
		t.Errorf("ListFederationRelationships calls = %d, want 3", n)
	}

	upd := relationship("b.org")
	upd.BundleEndpointUrl = "https://b.org/other"
	upd.BundleEndpointProfile = &types.FederationRelationship_HttpsSpiffe{HttpsSpiffe: &types.HTTPSSPIFFEProfile{EndpointSpiffeId: "spiffe://b.org/spire/server"}}
	ures, err := c.UpdateFederationRelationships(ctx, []*types.FederationRelationship{upd, relationship("zzz.org")},
		&types.FederationRelationshipMask{BundleEndpointUrl: true})
	if err != nil {
		t.Fatalf("UpdateFederationRelationships: %v", err)
	}
	if ures[0].Err != nil || ures[0].Relationship.BundleEndpointUrl != "https://b.org/other" || ures[0].Relationship.GetHttpsWeb() == nil {
		t.Errorf("update result 0 = %v, %v; want new URL and unchanged profile", ures[0].Relationship, ures[0].Err)
	}
	if ures[1].Err == nil {
		t.Errorf("update of a missing relationship succeeded")
	}

	dres, err := c.DeleteFederationRelationships(ctx, []string{"a.org", "nope.org"})
	if err != nil {
		t.Fatalf("DeleteFederationRelationships: %v", err)
	}
	if dres[0].ID != "a.org" || dres[0].Err != nil || dres[1].ID != "nope.org" || !IsNotFound(dres[1].Err) {
		t.Errorf("delete results = %+v", dres)
	}
	var names []string
	for _, r := range srv.Relationships() {
		names = append(names, r.TrustDomain)
	}
	if strings.Join(names, ",") != "b.org,c.org" {
		t.Errorf("server relationships = %v, want [b.org c.org]", names)
	}
}

func TestWaitReady(t *testing.T) {
	t.Run("server appears after dial", func(t *testing.T) {
		srv := spiretest.NewUnstarted(t)
		c := newClient(t, srv)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()

		if _, err := c.ListEntries(ctx); !IsUnavailable(err) {
			t.Fatalf("ListEntries before the server started: %v, want UNAVAILABLE", err)
		}
		done := make(chan error, 1)
		go func() { done <- c.WaitReady(ctx) }()
		time.Sleep(300 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("WaitReady returned %v before the server started", err)
		default:
		}
		srv.Start()
		if err := <-done; err != nil {
			t.Fatalf("WaitReady: %v", err)
		}
		if _, err := c.ListEntries(ctx); err != nil {
			t.Fatalf("ListEntries after WaitReady: %v", err)
		}
	})

	t.Run("context cancel stops polling", func(t *testing.T) {
		srv := spiretest.NewUnstarted(t)
		c := newClient(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)

		start := time.Now()
		err := c.WaitReady(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitReady = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("WaitReady took %v to notice cancellation", d)
		}
	})

	tests := []struct {
		name      string
		failures  int
		code      codes.Code
		wantCode  codes.Code
		wantCalls int
	}{
		{name: "retries transient failures", failures: 2, code: codes.Unavailable, wantCode: codes.OK, wantCalls: 3},
		{name: "returns permanent failures", failures: 1, code: codes.PermissionDenied, wantCode: codes.PermissionDenied, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := spiretest.New(t)
			c := newClient(t, srv)
			srv.FailNext(spiretest.MethodListEntries, tt.failures, tt.code)

			err := c.WaitReady(context.Background())
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("WaitReady = %v, want code %v", err, tt.wantCode)
			}
			if n := srv.Calls(spiretest.MethodListEntries); n != tt.wantCalls {
				t.Errorf("ListEntries calls = %d, want %d", n, tt.wantCalls)
			}
		})
	}
}

func TestItemError(t *testing.T) {
	err := fmt.Errorf("reconcile: %w", &ItemError{Op: "create entry", Key: "spiffe://example.org/a", Code: codes.AlreadyExists, Message: "similar entry already exists"})
	if !IsAlreadyExists(err) || IsNotFound(err) || IsUnavailable(err) {
		t.Errorf("classification of wrapped item error is wrong")
	}
	want := `reconcile: create entry "spiffe://example.org/a": AlreadyExists: similar entry already exists`
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if IsNotFound(nil) || IsAlreadyExists(nil) {
		t.Error("nil error classified as a failure")
	}
}
