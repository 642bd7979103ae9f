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
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	k8sfake "k8s.io/client-go/kubernetes/fake"
)

// rvInformer is an informer whose cache is at a resource version the test sets; Relist, when
// relistable, brings it to the API server's current one after a delay, as a reflector's
// list would.
type rvInformer struct {
	cache.SharedIndexInformer
	mu      sync.Mutex
	rv      int
	current func() int
	delay   time.Duration
	relists atomic.Int32
}

func (i *rvInformer) set(rv int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.rv = rv
}

func (i *rvInformer) LastSyncResourceVersion() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return strconv.Itoa(i.rv)
}

// GetStore returns a store that reports no resource version, as with AtomicFIFO off: the
// reflector's is used then.
func (i *rvInformer) GetStore() cache.Store { return cache.NewStore(cache.MetaNamespaceKeyFunc) }

type relistableRVInformer struct{ *rvInformer }

func (i relistableRVInformer) Relist() {
	i.relists.Add(1)
	go func() {
		time.Sleep(i.delay)
		i.set(i.current())
	}()
}

// checkedRVInformer can also check its cache against a list, which finds it the same or not.
type checkedRVInformer struct {
	relistableRVInformer
	same   bool
	checks *atomic.Int32
}

func (i checkedRVInformer) Current(context.Context) (bool, string, error) {
	i.checks.Add(1)
	return i.same, strconv.Itoa(i.current()), nil
}

var fastCatchUp = catchUpTimings{poll: 5 * time.Millisecond, natural: 50 * time.Millisecond, again: 200 * time.Millisecond, report: time.Hour}

// TestAwaitCaughtUp: a cache behind the Lease's resource version holds the writers back until
// it gets there, by its own events or by listing again; a cache already there costs nothing.
func TestAwaitCaughtUp(t *testing.T) {
	const leaseRV = 100
	for _, tc := range []struct {
		name string
		// start is where the cache is; event, if not zero, an event that arrives after 20ms.
		start, event int
		relistable   bool
		// checked: the informer can check itself against a list, which finds it the same
		// when same.
		checked, same bool
		wantRelists   int32
		wantChecks    int32
		wantWait      bool
		wantBehind    bool
	}{
		{name: "already there", start: 120, relistable: true, checked: true},
		{name: "caught up by its next event", start: 40, event: 130, relistable: true, checked: true, wantWait: true},
		{name: "quiet, found up to date by a list", start: 40, relistable: true, checked: true, same: true, wantChecks: 1, wantWait: true, wantBehind: true},
		{name: "quiet, differs from the list: made to list again", start: 40, relistable: true, checked: true, wantChecks: 1, wantRelists: 1, wantWait: true},
		{name: "quiet, cannot check: made to list again", start: 40, relistable: true, wantRelists: 1, wantWait: true},
		{name: "an event before the lease is not enough", start: 40, event: 99, relistable: true, wantRelists: 1, wantWait: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			inf := &rvInformer{rv: tc.start, current: func() int { return 150 }, delay: 20 * time.Millisecond}
			var informer cache.SharedIndexInformer = inf
			var checks atomic.Int32
			switch {
			case tc.checked:
				informer = checkedRVInformer{relistableRVInformer: relistableRVInformer{inf}, same: tc.same, checks: &checks}
			case tc.relistable:
				informer = relistableRVInformer{inf}
			}
			if tc.event != 0 {
				time.AfterFunc(20*time.Millisecond, func() { inf.set(tc.event) })
			}
			start := time.Now()
			if err := awaitCaughtUpWith(ctx, []watchedInformer{{name: "pods", informer: informer}}, strconv.Itoa(leaseRV), fastCatchUp); err != nil {
				t.Fatal(err)
			}
			waited := time.Since(start)
			if got := inf.relists.Load(); got != tc.wantRelists {
				t.Errorf("%d relists, want %d", got, tc.wantRelists)
			}
			if got := checks.Load(); got != tc.wantChecks {
				t.Errorf("%d checks against a list, want %d", got, tc.wantChecks)
			}
			if tc.wantWait != (waited >= 15*time.Millisecond) {
				t.Errorf("waited %v, want a wait: %v", waited, tc.wantWait)
			}
			// A cache a list proved up to date may stay at its last event's resource version.
			if rv, _ := strconv.Atoi(inf.LastSyncResourceVersion()); rv < leaseRV && !tc.wantBehind {
				t.Errorf("returned with the cache at %d, behind the lease at %d", rv, leaseRV)
			}
		})
	}

	t.Run("cannot list again: waits for its events as long as it takes", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		inf := &rvInformer{rv: 40}
		if err := awaitCaughtUpWith(ctx, []watchedInformer{{name: "pods", informer: inf}}, strconv.Itoa(leaseRV), fastCatchUp); err == nil {
			t.Errorf("returned with a cache behind the lease")
		}
	})
}

// TestRelistableInformerCatchesUp runs awaitCaughtUp on real informers of a fake clientset:
// the informers registered by narrowInformers can list again, and a quiet one gets past a
// resource version it never saw an event for.
func TestRelistableInformerCatchesUp(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := k8sfake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", ResourceVersion: "10"}})
	informer := relistable(&corev1.Namespace{}, client, client.CoreV1().Namespaces().List, client.CoreV1().Namespaces().Watch, nil, 0)
	if _, ok := informer.(interface{ Relist() }); !ok {
		t.Fatalf("%T cannot list again", informer)
	}
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("never synced")
	}
	// The fake API server's lists carry no resource version of their own; the relist is
	// what matters, seen as the reflector's last one changing.
	before := informer.LastSyncResourceVersion()
	informer.(interface{ Relist() }).Relist()
	deadline := time.Now().Add(5 * time.Second)
	relisted := false
	for time.Now().Before(deadline) && !relisted {
		// A relist replaces the cache: the namespace is still there, and the watch was
		// opened again (the fake counts the actions).
		watches := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" {
				watches++
			}
		}
		relisted = watches >= 2
		time.Sleep(10 * time.Millisecond)
	}
	if !relisted {
		t.Fatalf("no second list and watch after Relist (last synced %q before)", before)
	}
	if _, exists, _ := informer.GetStore().GetByKey("apps"); !exists {
		t.Errorf("the namespace is gone from the cache after the relist")
	}
}
