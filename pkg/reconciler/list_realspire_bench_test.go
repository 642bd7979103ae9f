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
	"os"
	"strconv"
	"testing"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// BenchmarkListRealSPIRE lists a real spire-server (sqlite) holding
// LIST_BENCH_ENTRIES entries (default 50000) of 10 per pod, as a full resync
// at start-up does: the raw ListEntries RPC without output mask, the client's
// ListEntries at several page sizes, and a whole steady-state Resync (list,
// merge, declare, plan; nothing to write). LIST_BENCH_DIR keeps the datastore
// between runs. It needs the real binaries: run it alone, under the heavy lock.
func BenchmarkListRealSPIRE(b *testing.B) {
	if testing.Short() {
		b.Skip("needs spire-server")
	}
	n := 50000
	if v, err := strconv.Atoi(os.Getenv("LIST_BENCH_ENTRIES")); err == nil {
		n = v
	}
	ctx := context.Background()
	server := realcluster.NewSPIRE(b, realcluster.SPIREOptions{Dir: os.Getenv("LIST_BENCH_DIR"), LogLevel: "WARN"})
	client, err := spire.Dial(ctx, server.SocketPath())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	declared := seedRealSPIRE(b, client, server.TrustDomain(), n)

	conn, err := grpc.NewClient("unix://"+server.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	raw := entryv1.NewEntryClient(conn)

	for _, pageSize := range []int{500, 1000, 2000, 5000, 10000} {
		b.Run(fmt.Sprintf("raw/page=%d", pageSize), func(b *testing.B) {
			for b.Loop() {
				got := 0
				token := ""
				for {
					resp, err := raw.ListEntries(ctx, &entryv1.ListEntriesRequest{PageSize: int32(pageSize), PageToken: token})
					if err != nil {
						b.Fatal(err)
					}
					got += len(resp.GetEntries())
					if token = resp.GetNextPageToken(); token == "" {
						break
					}
				}
				if got != n {
					b.Fatalf("listed %d entries, want %d", got, n)
				}
			}
		})
		b.Run(fmt.Sprintf("client/page=%d", pageSize), func(b *testing.B) {
			client.PageSize = pageSize
			for b.Loop() {
				if all, err := client.ListEntries(ctx); err != nil || len(all) != n {
					b.Fatalf("listed %d entries: %v", len(all), err)
				}
			}
		})
	}
	for _, pageSize := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("resync/page=%d", pageSize), func(b *testing.B) {
			client.PageSize = pageSize
			r := NewReconciler(client, Options{})
			for b.Loop() {
				res, err := r.Resync(ctx, declaring(declared...))
				if err != nil {
					b.Fatal(err)
				}
				if w := res.Plan.writes(); w != 0 {
					b.Fatalf("a steady-state resync planned %d writes", w)
				}
			}
		})
	}
}

// seedRealSPIRE makes SPIRE hold n pod entries, 10 a pod, and returns their declarations.
func seedRealSPIRE(b *testing.B, client *spire.Client, td string, n int) []*render.DeclaredEntry {
	ctx := context.Background()
	declared := make([]*render.DeclaredEntry, 0, n)
	entries := make([]*spiretypes.Entry, 0, n)
	for i := range n {
		pod, k := i/10, i%10
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", pod, pod)
		e := &spiretypes.Entry{
			SpiffeId: &spiretypes.SPIFFEID{TrustDomain: td, Path: fmt.Sprintf("/ns/default/sa/app-%d/k/%d", pod, k)},
			ParentId: &spiretypes.SPIFFEID{TrustDomain: td, Path: fmt.Sprintf("/spire/agent/k8s_psat/cluster/node-%d", pod%100)},
			Selectors: []*spiretypes.Selector{{Type: "k8s", Value: render.PodUIDSelectorPrefix + uid},
				{Type: "k8s", Value: "ns:default"}},
			X509SvidTtl: 3600,
			DnsNames:    []string{fmt.Sprintf("app-%d.default.svc", pod)},
		}
		entries = append(entries, e)
		declared = append(declared, declare(e, fmt.Sprintf("spiffeid-%d", k), 0, uid))
	}
	existing, err := client.ListEntries(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if len(existing) == n {
		return declared
	}
	if len(existing) != 0 {
		b.Fatalf("SPIRE holds %d entries, want 0 or %d", len(existing), n)
	}
	start := time.Now()
	results, err := client.CreateEntries(ctx, entries)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.Logf("created %d entries in %s", n, time.Since(start))
	return declared
}
