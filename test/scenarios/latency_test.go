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

package scenarios

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// entryPollInterval is how often the probe lists SPIRE's entries: the latencies it
// measures are this coarse.
const entryPollInterval = 20 * time.Millisecond

// probe records, for the pods of one namespace, when each was first seen scheduled and
// when it was deleted (from a watch), and when SPIRE first listed an entry for it and first
// listed none again (from polling SPIRE's API every entryPollInterval).
type probe struct {
	mu         sync.Mutex
	scheduled  map[string]time.Time // pod UID →
	deleted    map[string]time.Time
	entrySeen  map[string]time.Time
	entryGone  map[string]time.Time
	polls      int
	pollErrors int
	lastError  error
}

// startProbe watches the namespace's pods and polls SPIRE until the test ends or stop is
// called.
func (s *scenario) startProbe() (p *probe, stop func()) {
	s.t.Helper()
	p = &probe{scheduled: map[string]time.Time{}, deleted: map[string]time.Time{}, entrySeen: map[string]time.Time{}, entryGone: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(s.t.Context())
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(s.ns))
	informer := factory.Core().V1().Pods().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.podSeen(obj) },
		UpdateFunc: func(_, obj any) { p.podSeen(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.record(p.deleted, string(pod.UID), time.Now())
			}
		},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		s.t.Fatal("the probe's pod informer never synced")
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pollSPIRE(ctx, s.entries) })
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		wg.Wait()
		factory.Shutdown()
	}
	s.t.Cleanup(stop)
	return p, stop
}

func (p *probe) podSeen(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		p.record(p.scheduled, string(pod.UID), time.Now())
	}
}

// record keeps the first time only.
func (p *probe) record(m map[string]time.Time, uid string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := m[uid]; !ok {
		m[uid] = at
	}
}

func (p *probe) pollSPIRE(ctx context.Context, entries entryv1.EntryClient) {
	ticker := time.NewTicker(entryPollInterval)
	defer ticker.Stop()
	for {
		resp, err := entries.ListEntries(ctx, &entryv1.ListEntriesRequest{})
		now := time.Now()
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.polls++
		if err != nil {
			p.pollErrors++
			p.lastError = err
		} else {
			present := map[string]bool{}
			for _, e := range resp.GetEntries() {
				for _, sel := range e.GetSelectors() {
					if uid, ok := strings.CutPrefix(sel.GetType()+":"+sel.GetValue(), podUIDSelector); ok {
						present[uid] = true
						if _, seen := p.entrySeen[uid]; !seen {
							p.entrySeen[uid] = now
						}
					}
				}
			}
			for uid := range p.entrySeen {
				if _, gone := p.entryGone[uid]; !gone && !present[uid] {
					p.entryGone[uid] = now
				}
			}
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// latencies returns, for the pods in uids, the time from each pod's event in from to its
// entry's in to, and how many of uids had no such pair.
func (p *probe) latencies(uids []string, from, to map[string]time.Time) (lat []time.Duration, missing int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, uid := range uids {
		a, okA := from[uid]
		b, okB := to[uid]
		if !okA || !okB {
			missing++
			continue
		}
		// The watch may report a pod after the poll saw its entry.
		lat = append(lat, max(b.Sub(a), 0))
	}
	return lat, missing
}

// percentile returns the p-th percentile (0 < p ≤ 1) of durations by the nearest-rank
// method, or 0 for none.
func percentile(durations []time.Duration, p float64) time.Duration {
	if len(durations) == 0 {
		return 0
	}
	sorted := slices.Clone(durations)
	slices.Sort(sorted)
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100…1, unsorted
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of four is the second", ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 0.5, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p100 is the max", ms(hundred...), 1, 100 * time.Millisecond},
	} {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("%s: percentile(%v) = %s, want %s", tc.name, tc.p, got, tc.want)
		}
	}
}
