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
	"fmt"
	"runtime"
	"strings"
	"testing"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// listedPodEntries builds n entries as a list of SPIRE decodes them, 10 a pod: every string is
// its own allocation, as protobuf decoding makes it.
func listedPodEntries(n int) []*spiretypes.Entry {
	entries := make([]*spiretypes.Entry, n)
	for i := range entries {
		pod, k := i/10, i%10
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", pod, pod)
		entries[i] = &spiretypes.Entry{
			Id:       fmt.Sprintf("%08x-1111-4000-8000-%012x", i, i),
			SpiffeId: &spiretypes.SPIFFEID{TrustDomain: strings.Clone("example.org"), Path: fmt.Sprintf("/ns/default/sa/app-%d/k/%d", pod, k)},
			ParentId: &spiretypes.SPIFFEID{TrustDomain: strings.Clone("example.org"), Path: fmt.Sprintf("/spire/agent/k8s_psat/cluster/node-%d", pod%100)},
			Selectors: []*spiretypes.Selector{{Type: strings.Clone("k8s"), Value: render.PodUIDSelectorPrefix + uid},
				{Type: strings.Clone("k8s"), Value: strings.Clone("ns:default")}},
			X509SvidTtl: 3600,
			DnsNames:    []string{fmt.Sprintf("app-%d.default.svc", pod)},
			CreatedAt:   1700000000 + int64(i),
		}
	}
	return entries
}

// BenchmarkEntryCacheMemory reports the live heap the entry cache holds per entry once a list
// of n pod entries is merged into it and the list itself is gone.
func BenchmarkEntryCacheMemory(b *testing.B) {
	for _, n := range []int{100_000, 300_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			var perEntry float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c := newEntryCache()
				c.beginList()
				c.replaceListed(listedPodEntries(n))
				runtime.GC()
				runtime.ReadMemStats(&after)
				perEntry = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				runtime.KeepAlive(c)
			}
			b.ReportMetric(perEntry, "heap-B/entry")
		})
	}
}
