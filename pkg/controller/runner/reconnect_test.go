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

package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// resyncRecord is one resync every ran: when, counted from the start of the test's bubble,
// and why.
type resyncRecord struct {
	At     time.Duration
	Reason string
}

// resyncLog is a fake resync that records its runs, takes took of (fake) time and fails
// while fail says so.
type resyncLog struct {
	start time.Time
	took  time.Duration
	fail  func(run int, reason string) bool

	mu   sync.Mutex
	runs []resyncRecord
}

func (l *resyncLog) resync(ctx context.Context, reason string) error {
	l.mu.Lock()
	l.runs = append(l.runs, resyncRecord{At: time.Since(l.start), Reason: reason})
	run := len(l.runs)
	l.mu.Unlock()
	if l.took > 0 {
		time.Sleep(l.took)
	}
	if l.fail != nil && l.fail(run, reason) {
		return errors.New("SPIRE is not listable")
	}
	return nil
}

func (l *resyncLog) records() []resyncRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]resyncRecord(nil), l.runs...)
}

// runEvery runs every in the bubble until the test's function returns.
func runEvery(t *testing.T, l *resyncLog, interval time.Duration, share float64, reconnected chan struct{}) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		every(ctx, interval, share, l.resync, reconnected)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// TestReconnectionResyncsAtOnce: a reconnection has a full resync run at once, not at the next
// interval, and the interval then counts from it.
func TestReconnectionResyncsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &resyncLog{start: time.Now()}
		reconnected := make(chan struct{}, 1)
		runEvery(t, l, 10*time.Minute, 0.1, reconnected)

		time.Sleep(time.Minute)
		reconnected <- struct{}{}
		synctest.Wait()
		want := []resyncRecord{{time.Minute, ResyncOnReconnect}}
		if diff := cmp.Diff(want, l.records()); diff != "" {
			t.Fatalf("resyncs after a reconnection (-want +got):\n%s", diff)
		}

		// The periodic resync is due an interval (jittered by up to 10%) after the last one.
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if diff := cmp.Diff(want, l.records()); diff != "" {
			t.Fatalf("the periodic resync did not wait an interval after the reconnection's (-want +got):\n%s", diff)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		got := l.records()
		if len(got) != 2 || got[1].Reason != ResyncOnInterval || got[1].At < 11*time.Minute || got[1].At > 12*time.Minute {
			t.Fatalf("resyncs = %+v, want the reconnection's, then one periodic 10-11 minutes after it", got)
		}
	})
}

// TestReconnectionResyncIsRetriedUntilItSucceeds: a resync after a reconnection that fails is
// retried with backoff, not left to the next interval, and stops once one succeeds.
func TestReconnectionResyncIsRetriedUntilItSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &resyncLog{start: time.Now(), fail: func(run int, _ string) bool { return run <= 3 }}
		reconnected := make(chan struct{}, 1)
		runEvery(t, l, time.Hour, 0.1, reconnected)

		reconnected <- struct{}{}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		got := l.records()
		if len(got) != 4 {
			t.Fatalf("resyncs = %+v, want 3 failures and a success within 5s", got)
		}
		for i, r := range got {
			if r.Reason != ResyncOnReconnect {
				t.Errorf("resync %d has reason %q, want %q", i, r.Reason, ResyncOnReconnect)
			}
			if i > 0 && r.At-got[i-1].At < 90*time.Millisecond {
				t.Errorf("resync %d came %v after the failed one before it: no backoff", i, r.At-got[i-1].At)
			}
		}
		time.Sleep(50 * time.Minute)
		synctest.Wait()
		if n := len(l.records()); n != 4 {
			t.Errorf("%d resyncs after the one that succeeded, want none before the interval", n-4)
		}
	})
}

// TestFailedPeriodicResyncWaitsForTheInterval: without a reconnection, a failed periodic
// resync is retried at the next interval, as before.
func TestFailedPeriodicResyncWaitsForTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &resyncLog{start: time.Now(), fail: func(int, string) bool { return true }}
		runEvery(t, l, 10*time.Minute, 0.1, make(chan struct{}, 1))
		time.Sleep(15 * time.Minute)
		synctest.Wait()
		if got := l.records(); len(got) != 1 || got[0].Reason != ResyncOnInterval {
			t.Fatalf("resyncs = %+v, want one periodic in 15 minutes", got)
		}
	})
}

// TestReconnectionDuringAResyncResyncsAgain: a reconnection while a resync runs, which may
// have listed SPIRE before it, has another resync run after it; that one waits as long as
// the share of time resyncs may take says (a resync of 2s with a share of 0.1: 18s).
func TestReconnectionDuringAResyncResyncsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &resyncLog{start: time.Now(), took: 2 * time.Second}
		reconnected := make(chan struct{}, 1)
		runEvery(t, l, time.Hour, 0.1, reconnected)

		reconnected <- struct{}{}
		time.Sleep(time.Second)
		reconnected <- struct{}{} // while the first runs
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []resyncRecord{{0, ResyncOnReconnect}, {20 * time.Second, ResyncOnReconnect}}
		if diff := cmp.Diff(want, l.records()); diff != "" {
			t.Fatalf("resyncs (-want +got):\n%s", diff)
		}
	})
}

// TestReconnectionsAreCoalesced: reconnections that arrive while one resync waits for its
// turn are one resync, not one each.
func TestReconnectionsAreCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &resyncLog{start: time.Now(), took: 2 * time.Second}
		reconnected := make(chan struct{}, 1)
		runEvery(t, l, time.Hour, 0.1, reconnected)

		reconnected <- struct{}{}
		time.Sleep(3 * time.Second) // the first ran; the next may start at 20s
		for range 5 {
			reconnected <- struct{}{}
			time.Sleep(time.Second)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []resyncRecord{{0, ResyncOnReconnect}, {20 * time.Second, ResyncOnReconnect}}
		if diff := cmp.Diff(want, l.records()); diff != "" {
			t.Fatalf("resyncs (-want +got):\n%s", diff)
		}
	})
}

// TestRunWatchesSPIREFromItsStart: Run starts the watch before the first resync, so that a
// reconnection during it is not lost, and each reconnection then has a resync run.
func TestRunWatchesSPIREFromItsStart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	const controller = "test-run-watch-spire"

	starts := metrics.FullResyncStarts.WithLabelValues(controller, ResyncOnReconnect)
	before := value(starts)
	var mu sync.Mutex
	var reconnected func() // set once the watch runs
	var resyncs int
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Loop{
			Name:         controller,
			Events:       NewEvents(ctx, controller, nil, false),
			CachesSynced: []cache.InformerSynced{func() bool { return true }},
			WatchSPIRE: func(ctx context.Context, f func()) {
				mu.Lock()
				reconnected = f
				mu.Unlock()
				<-ctx.Done()
			},
			Resync: func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				resyncs++
				if resyncs == 1 {
					// SPIRE restarts while the first resync runs: after it listed, say.
					mu.Unlock()
					waitFor(t, "the watch to run", func() bool {
						mu.Lock()
						defer mu.Unlock()
						return reconnected != nil
					})
					mu.Lock()
					reconnected()
				}
				return nil
			},
			ResyncInterval: time.Hour,
		})
	}()
	defer func() {
		cancel()
		<-done
	}()

	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return resyncs
	}
	waitFor(t, "a resync after the reconnection during the first", func() bool { return count() == 2 })
	mu.Lock()
	reconnected()
	mu.Unlock()
	waitFor(t, "a resync after a reconnection", func() bool { return count() == 3 })
	if got := value(starts) - before; got != 2 {
		t.Errorf("full_resync_starts_total{reason=%q} grew by %v, want 2", ResyncOnReconnect, got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
