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
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// testLease is a short Lease: a test sees a renewal fail and a takeover in about a second.
var testLease = config.LeaderElection{Enabled: true, ResourceName: "spire-registrar", ResourceNamespace: "default",
	LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}

// leaseAPI is a fake API server holding the Lease, which a test can take away and bring
// back, and which records the Lease's writes.
type leaseAPI struct {
	*k8sfake.Clientset
	down atomic.Bool

	mu     sync.Mutex
	writes []leaseWrite
}

type leaseWrite struct {
	at     time.Time
	holder string
}

func newLeaseAPI() *leaseAPI {
	api := &leaseAPI{Clientset: k8sfake.NewClientset()}
	api.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if api.down.Load() {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		var lease *coordinationv1.Lease
		if write, ok := action.(interface{ GetObject() runtime.Object }); ok {
			lease, _ = write.GetObject().(*coordinationv1.Lease)
		}
		if lease != nil {
			holder := ""
			if lease.Spec.HolderIdentity != nil {
				holder = *lease.Spec.HolderIdentity
			}
			api.mu.Lock()
			api.writes = append(api.writes, leaseWrite{at: time.Now(), holder: holder})
			api.mu.Unlock()
		}
		return false, nil, nil
	})
	return api
}

// releases are the times the Lease was written with no holder.
func (api *leaseAPI) releases() []time.Time {
	api.mu.Lock()
	defer api.mu.Unlock()
	var out []time.Time
	for _, w := range api.writes {
		if w.holder == "" {
			out = append(out, w.at)
		}
	}
	return out
}

// termLog records the terms an election ran: when each began and ended, and why.
type termLog struct {
	mu     sync.Mutex
	terms  []termRecord
	active atomic.Int32
	// overlap is set when a term began while another was running.
	overlap atomic.Bool
	// stopDelay is how long a term takes to stop once its context ends.
	stopDelay time.Duration
}

type termRecord struct {
	began, ended time.Time
	cause        error
	// lost: the term was told its Lease was lost, to stop its writes in flight.
	lost bool
}

func (l *termLog) run(ctx context.Context, _ string, lost <-chan struct{}) (bool, error) {
	if l.active.Add(1) > 1 {
		l.overlap.Store(true)
	}
	l.mu.Lock()
	i := len(l.terms)
	l.terms = append(l.terms, termRecord{began: time.Now()})
	l.mu.Unlock()
	<-ctx.Done()
	time.Sleep(l.stopDelay)
	wasLost := false
	select {
	case <-lost:
		wasLost = true
	default:
	}
	l.mu.Lock()
	l.terms[i].ended, l.terms[i].cause, l.terms[i].lost = time.Now(), context.Cause(ctx), wasLost
	l.mu.Unlock()
	l.active.Add(-1)
	return true, nil
}

func (l *termLog) snapshot() []termRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]termRecord(nil), l.terms...)
}

// waitFor polls cond for up to timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startElection(t *testing.T, ctx context.Context, api *leaseAPI, log *termLog) (*Health, <-chan error) {
	t.Helper()
	health := &Health{}
	health.electing.Store(true)
	e, err := newLeaderElection(api, testLease, health)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.run(ctx, log.run) }()
	return health, done
}

// TestLostLeaseStandsByAndLeadsAgain: an API server outage longer than the Lease ends the
// leadership, and the election goes on: no return, no error. Once the API server is back,
// the same process leads again, and its new term begins only after the old one stopped.
// Neither probe fails throughout.
func TestLostLeaseStandsByAndLeadsAgain(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	api := newLeaseAPI()
	log := &termLog{stopDelay: 50 * time.Millisecond}
	health, done := startElection(t, ctx, api, log)
	probe := func() {
		if err := health.Alive(); err != nil {
			t.Errorf("liveness failed: %v", err)
		}
		if err := health.Ready(); err != nil {
			t.Errorf("readiness failed: %v", err)
		}
	}

	waitFor(t, "the first term", 5*time.Second, func() bool { return len(log.snapshot()) == 1 })
	probe()
	api.down.Store(true)
	outage := time.Now()
	waitFor(t, "the first term to end", 5*time.Second, func() bool { return !log.snapshot()[0].ended.IsZero() })
	first := log.snapshot()[0]
	if !errors.Is(first.cause, errLeadershipLost) || !first.lost {
		t.Errorf("the term ended with %v (told lost: %v), want the lease lost", first.cause, first.lost)
	}
	if lasted := first.ended.Sub(outage); lasted > testLease.LeaseDuration {
		t.Errorf("the term stopped %v into the outage, after the lease (%v) could have been taken", lasted, testLease.LeaseDuration)
	}
	time.Sleep(2 * testLease.LeaseDuration)
	probe()
	select {
	case err := <-done:
		t.Fatalf("the election returned during the outage: %v", err)
	default:
	}
	if got := health.Phase(); got != phaseStandingBy.String() {
		t.Errorf("phase during the outage = %q, want %q", got, phaseStandingBy)
	}
	if health.stoppingSince.Load() != 0 {
		t.Errorf("Health still counts a stopped term as stopping: liveness would fail %v later", termStopTimeout)
	}

	api.down.Store(false)
	back := time.Now()
	waitFor(t, "a second term", 5*time.Second, func() bool { return len(log.snapshot()) == 2 })
	terms := log.snapshot()
	t.Logf("first term stopped %v into the outage; second began %v after the API server returned",
		terms[0].ended.Sub(outage).Round(time.Millisecond), terms[1].began.Sub(back).Round(time.Millisecond))
	if log.overlap.Load() || terms[1].began.Before(terms[0].ended) {
		t.Errorf("the second term began before the first had stopped")
	}
	probe()

	cancel()
	if err := <-done; err != nil {
		t.Errorf("the election returned %v on shutdown", err)
	}
	if ended := log.snapshot()[1]; !errors.Is(ended.cause, errShuttingDown) || ended.lost {
		t.Errorf("the second term ended with %v (told lost: %v), want shutting down with the lease held", ended.cause, ended.lost)
	}
}

// TestLeaseReleasedOnlyAfterTheTermStopped: client-go releases the Lease before it cancels
// the leadership's context; the release must wait until the term has stopped writing.
func TestLeaseReleasedOnlyAfterTheTermStopped(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	api := newLeaseAPI()
	log := &termLog{stopDelay: 300 * time.Millisecond}
	_, done := startElection(t, ctx, api, log)
	waitFor(t, "a term", 5*time.Second, func() bool { return len(log.snapshot()) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	term := log.snapshot()[0]
	releases := api.releases()
	if len(releases) != 1 {
		t.Fatalf("%d releases of the lease, want 1", len(releases))
	}
	if releases[0].Before(term.ended) {
		t.Errorf("the lease was released %v before the term stopped", term.ended.Sub(releases[0]))
	}
}

// TestFenceEndsTheTermBeforeTheLeaseExpires: with renewals failing, the term ends within
// renewDeadline of the last renewal, before any other replica may take the Lease.
func TestFenceEndsTheTermBeforeTheLeaseExpires(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lock := &guardedLock{identity: "me"}
	lock.record(leaseRecord("me"), time.Now())
	termCtx, cancelTerm := context.WithCancelCause(ctx)
	defer cancelTerm(nil)
	stop := fence(lock, testLease.RenewDeadline, func() { cancelTerm(errRenewalOverdue) })
	defer stop()
	// Renewals go on for a while, then stop.
	for range 5 {
		time.Sleep(testLease.RetryPeriod)
		lock.record(leaseRecord("me"), time.Now())
	}
	lastRenewal := lock.renewed()
	<-termCtx.Done()
	ended := time.Now()
	if !errors.Is(context.Cause(termCtx), errRenewalOverdue) {
		t.Errorf("the term ended with %v, want the renewal overdue", context.Cause(termCtx))
	}
	after := ended.Sub(lastRenewal)
	t.Logf("the term ended %v after the last renewal (renewDeadline %v, leaseDuration %v)", after.Round(time.Millisecond), testLease.RenewDeadline, testLease.LeaseDuration)
	if after < testLease.RenewDeadline || after >= testLease.LeaseDuration {
		t.Errorf("the term ended %v after the last renewal, want within [%v, %v)", after, testLease.RenewDeadline, testLease.LeaseDuration)
	}
}

// TestStuckTermFailsLiveness: a term that does not stop after its leadership ended makes
// liveness fail once the bound passes, and only then; readiness does not follow it.
func TestStuckTermFailsLiveness(t *testing.T) {
	health := &Health{stopTimeout: 100 * time.Millisecond}
	health.electing.Store(true)
	if err := health.Alive(); err != nil {
		t.Fatalf("alive before anything stopped: %v", err)
	}
	health.stopping(time.Now())
	if err := health.Alive(); err != nil {
		t.Errorf("not alive right after a term began to stop: %v", err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := health.Alive(); err == nil {
		t.Errorf("alive with a term stuck stopping past the bound")
	} else {
		t.Logf("/healthz: %v", err)
	}
	if err := health.Ready(); err != nil {
		t.Errorf("readiness follows a stuck term: %v", err)
	}
	health.stopping(time.Time{})
	if err := health.Alive(); err != nil {
		t.Errorf("not alive once the term stopped: %v", err)
	}
}

// TestReadiness: without leader election the process is ready once every controller
// synced, with a reason before; with it, from the start of the election on.
func TestReadiness(t *testing.T) {
	health := &Health{}
	if err := health.Ready(); err == nil {
		t.Errorf("ready before anything started")
	}
	c := &fakeController{name: "entry"}
	health.setControllers([]Controller{c})
	err := health.Ready()
	if err == nil {
		t.Errorf("ready before the controller synced")
	} else {
		t.Logf("/readyz before the first sync: %v", err)
	}
	c.synced.Store(true)
	if err := health.Ready(); err != nil {
		t.Errorf("not ready once synced: %v", err)
	}

	elected := &Health{}
	elected.electing.Store(true)
	for _, p := range []leadershipPhase{phaseWarming, phaseStandingBy, phaseCatchingUp, phaseLeading, phaseStopping} {
		elected.setPhase(p)
		elected.setControllers([]Controller{&fakeController{name: "entry"}})
		if err := elected.Ready(); err != nil {
			t.Errorf("not ready while %s: %v", p, err)
		}
	}
}

type fakeController struct {
	name   string
	synced atomic.Bool
}

func (c *fakeController) Name() string                   { return c.name }
func (c *fakeController) Run(ctx context.Context, _ int) { <-ctx.Done() }
func (c *fakeController) HasSynced() bool                { return c.synced.Load() }

func leaseRecord(holder string) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder, RenewTime: metav1.Now()}
}
