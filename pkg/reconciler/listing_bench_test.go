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
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// pagingMemClient hands a memClient's entries over page by page, decoding (copying) each page
// only when it is handed over, as spire.Client does.
type pagingMemClient struct {
	*memClient
	pageSize int
}

func (c *pagingMemClient) ListEntryPages(_ context.Context, page func([]*spiretypes.Entry) error) error {
	c.mu.Lock()
	stored := make([]*spiretypes.Entry, 0, len(c.entries))
	for _, e := range c.entries {
		stored = append(stored, e)
	}
	c.mu.Unlock()
	for lo := 0; lo < len(stored); lo += c.pageSize {
		p := make([]*spiretypes.Entry, 0, c.pageSize)
		for _, e := range stored[lo:min(lo+c.pageSize, len(stored))] {
			p = append(p, proto.CloneOf(e))
		}
		if err := page(p); err != nil {
			return err
		}
	}
	return nil
}

// peakHeap samples the live heap objects every millisecond until stop is called, which
// returns the highest sample.
func peakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	var peak uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// BenchmarkResyncListPeakHeap measures how far the heap grows above what it held before a
// steady-state resync of 300k entries, with SPIRE's list held whole and handed over page by
// page (pages of spire.DefaultPageSize): the cache, the declared entries and the plan are the
// same, only the decoded list differs.
//
//	go test -run '^$' -bench BenchmarkResyncListPeakHeap -benchtime 3x ./pkg/reconciler/
func BenchmarkResyncListPeakHeap(b *testing.B) {
	for _, tc := range []struct {
		name  string
		paged bool
	}{{"whole", false}, {"paged", true}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			mem := newMemClient()
			declared := scaleDeclared(mem, 30000, 10)
			var client spire.EntryClient = mem
			if tc.paged {
				client = &pagingMemClient{memClient: mem, pageSize: spire.DefaultPageSize}
			}
			r := NewReconciler(client, Options{})
			if _, err := r.Resync(ctx, declaring(declared...)); err != nil {
				b.Fatal(err)
			}
			var growth uint64
			for b.Loop() {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				stop := peakHeap()
				if _, err := r.Resync(ctx, declaring(declared...)); err != nil {
					b.Fatal(err)
				}
				growth = max(growth, stop()-before.HeapAlloc)
			}
			b.ReportMetric(float64(growth)/(1<<20), "peak-growth-MiB")
		})
	}
}
