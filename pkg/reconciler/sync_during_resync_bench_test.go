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
	"sync"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// scaleDeclared declares perPod entries for each of pods pods, as perPod ClusterSPIFFEIDs
// selecting every pod would, and seeds SPIRE with them.
func scaleDeclared(client *memClient, pods, perPod int) []*render.DeclaredEntry {
	declared := make([]*render.DeclaredEntry, 0, pods*perPod)
	for i := range pods {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		for k := range perPod {
			e := podEntry("", uid, fmt.Sprintf("/ns/default/sa/app-%d/k/%d", i, k))
			declared = append(declared, declare(e, fmt.Sprintf("spiffeid-%d", k), 0, uid))
		}
	}
	entries := make([]*spiretypes.Entry, len(declared))
	for i, d := range declared {
		entries[i] = d.Entry
	}
	if _, err := client.CreateEntries(context.Background(), entries); err != nil {
		panic(err)
	}
	return declared
}

// BenchmarkSyncDuringResync measures how long the sync of a new pod takes while full resyncs
// of a large SPIRE server run back to back. SPIRE is the in-memory fake; its list takes
// listDelay, about what SPIRE takes to list 300k entries. One op is one pod created and
// synced; pods come every millisecond. It reports the p50, p99 and worst sync latency.
func BenchmarkSyncDuringResync(b *testing.B) {
	const listDelay = 500 * time.Millisecond
	for _, size := range []struct{ pods, perPod int }{{3000, 10}, {30000, 10}} {
		b.Run(fmt.Sprintf("entries=%d", size.pods*size.perPod), func(b *testing.B) {
			ctx := context.Background()
			client := newMemClient()
			base := scaleDeclared(client, size.pods, size.perPod)
			r := NewReconciler(client, Options{})
			var mu sync.Mutex
			declared := base
			declareAll := func(context.Context) (Declared, error) {
				mu.Lock()
				defer mu.Unlock()
				return Declared{Entries: slices.Clip(declared)}, nil
			}
			if _, err := r.Resync(ctx, declareAll); err != nil {
				b.Fatal(err)
			}
			client.listDelay = listDelay

			stop := make(chan struct{})
			resyncs := 0
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := r.Resync(ctx, declareAll); err != nil {
						b.Error(err)
						return
					}
					resyncs++
				}
			})

			latencies := make([]time.Duration, 0, b.N)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				<-tick.C
				uid := types.UID(fmt.Sprintf("new-%d", i))
				d := declare(podEntry("", string(uid), fmt.Sprintf("/new/%d", i)), "spiffeid-0", 0, string(uid))
				mu.Lock()
				declared = append(declared, d)
				mu.Unlock()
				start := time.Now()
				if _, err := r.Sync(ctx, PodScope(uid), []*render.DeclaredEntry{d}); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(start))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(latencies)
			at := func(q float64) float64 {
				return float64(latencies[min(len(latencies)-1, int(q*float64(len(latencies))))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(at(1), "max-ms")
			b.ReportMetric(float64(resyncs), "resyncs")
		})
	}
}

// BenchmarkResyncSteadyState measures a full resync that finds nothing to write, SPIRE's list
// aside: merging the list into the cache and planning every scope.
func BenchmarkResyncSteadyState(b *testing.B) {
	for _, size := range []struct{ pods, perPod int }{{3000, 10}, {30000, 10}} {
		b.Run(fmt.Sprintf("entries=%d", size.pods*size.perPod), func(b *testing.B) {
			ctx := context.Background()
			client := newMemClient()
			declared := scaleDeclared(client, size.pods, size.perPod)
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
