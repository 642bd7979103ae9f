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

package app

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// recordingSPIRE is a SPIRE server that records the writes it receives.
type recordingSPIRE struct {
	spire.API
	mu     sync.Mutex
	writes []string
}

func (r *recordingSPIRE) record(w string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, w)
}

func (r *recordingSPIRE) CreateEntries(_ context.Context, entries []*types.Entry) ([]spire.EntryResult, error) {
	out := make([]spire.EntryResult, len(entries))
	for i, e := range entries {
		r.record("create " + e.GetSpiffeId().GetPath())
		out[i] = spire.EntryResult{Entry: e}
	}
	return out, nil
}

func (r *recordingSPIRE) DeleteFederationRelationships(_ context.Context, tds []string) ([]spire.DeleteResult, error) {
	out := make([]spire.DeleteResult, len(tds))
	for i, td := range tds {
		r.record("delete " + td)
		out[i] = spire.DeleteResult{ID: td}
	}
	return out, nil
}

// TestSPIREChainNeverWritesInADryRun checks the client the controllers get: with DryRun, no
// write reaches the embedder's SPIRE client and each is recorded in the plan; without, writes
// reach it.
func TestSPIREChainNeverWritesInADryRun(t *testing.T) {
	ctx := context.Background()
	for _, dryRun := range []bool{true, false} {
		server := &recordingSPIRE{}
		var plan bytes.Buffer
		api, release := spireChain(ControllerContext{SPIRE: server, DryRun: dryRun, DryRunOutput: &plan})
		if _, err := api.CreateEntries(ctx, []*types.Entry{{SpiffeId: &types.SPIFFEID{TrustDomain: "example.org", Path: "/web"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := api.DeleteFederationRelationships(ctx, []string{"partner.org"}); err != nil {
			t.Fatal(err)
		}
		release(false)
		lines := strings.Count(plan.String(), "\n")
		switch {
		case dryRun && (len(server.writes) != 0 || lines != 2):
			t.Errorf("dry run: SPIRE got %q, plan has %d lines:\n%s", server.writes, lines, plan.String())
		case !dryRun && (len(server.writes) != 2 || lines != 0):
			t.Errorf("SPIRE got %q, want both writes; plan has %d lines", server.writes, lines)
		}
	}
}

// TestSPIREChainKeepsAnEmbeddersBatching checks that a client that batches already is not
// batched again, so its options and counters stay meaningful, and is still replaced for
// writes in a dry run.
func TestSPIREChainKeepsAnEmbeddersBatching(t *testing.T) {
	ctx := context.Background()
	for _, dryRun := range []bool{false, true} {
		server := &recordingSPIRE{}
		own := spire.NewBatchedAPI(server, spire.BatchingOptions{})
		api, release := spireChain(ControllerContext{SPIRE: own, DryRun: dryRun})
		if _, err := api.CreateEntries(ctx, []*types.Entry{{SpiffeId: &types.SPIFFEID{TrustDomain: "example.org", Path: "/web"}}}); err != nil {
			t.Fatal(err)
		}
		release(false)
		wantCalls := int64(1)
		if dryRun {
			wantCalls = 0
		}
		if st := own.Stats(); st.Calls != wantCalls || int64(len(server.writes)) != wantCalls {
			t.Errorf("dry run %v: the embedder's batching saw %d calls and SPIRE %d writes, want %d", dryRun, st.Calls, len(server.writes), wantCalls)
		}
		own.Close()
	}
}

// pagedSPIRE is a SPIRE server that lists its entries in pages of one.
type pagedSPIRE struct {
	spire.API
	entries []*types.Entry
}

func (p *pagedSPIRE) ListEntryPages(_ context.Context, page func([]*types.Entry) error) error {
	for _, e := range p.entries {
		if err := page([]*types.Entry{e}); err != nil {
			return err
		}
	}
	return nil
}

// TestSPIREChainListsPageByPage: every client of the chain passes a paged listing on, so that
// a resync never holds SPIRE's whole decoded list, in a dry run too.
func TestSPIREChainListsPageByPage(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		server := &pagedSPIRE{entries: []*types.Entry{{Id: "a"}, {Id: "b"}, {Id: "c"}}}
		api, release := spireChain(ControllerContext{SPIRE: server, DryRun: dryRun})
		pages := 0
		if err := spire.ListEntryPages(context.Background(), api, func([]*types.Entry) error { pages++; return nil }); err != nil {
			t.Fatal(err)
		}
		release(false)
		if pages != 3 {
			t.Errorf("dryRun=%v: the chain handed over %d pages of SPIRE's 3", dryRun, pages)
		}
	}
}

// watchingSPIRE is a SPIRE client whose connection came back once, as soon as it is watched.
type watchingSPIRE struct {
	spire.API
}

func (watchingSPIRE) WatchReconnects(ctx context.Context, reconnected func()) {
	reconnected()
	<-ctx.Done()
}

// TestSPIREChainWatchesReconnects: every client of the chain passes the watch of SPIRE's
// connection on, so that both controllers resync when SPIRE is back, in a dry run too.
func TestSPIREChainWatchesReconnects(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		api, release := spireChain(ControllerContext{SPIRE: watchingSPIRE{}, DryRun: dryRun})
		ctx, cancel := context.WithCancel(context.Background())
		seen := false
		watched := spire.WatchReconnects(ctx, api, func() {
			seen = true
			cancel()
		})
		release(false)
		if !watched || !seen {
			t.Errorf("dryRun=%v: the chain watched %v and reported the reconnection %v, want both", dryRun, watched, seen)
		}
	}
}
