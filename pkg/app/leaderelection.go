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
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// inClusterNamespaceFile holds the pod's namespace when running in a cluster.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// termStopTimeout bounds how long the controllers of a leadership that ended may take to
// stop: their SPIRE calls end within spire.DefaultCallTimeout (30 s), so a term still running
// long after is deadlocked, and liveness fails (see Health.Alive).
const termStopTimeout = 2 * time.Minute

// leadershipPhase is where a replica is in leader election. Every replica runs the same loop:
//
//	warming ─▶ standing by ─(Lease acquired)─▶ catching up ─(caches caught up)─▶ leading
//	               ▲                                 │                              │
//	               └─(stopped)── stopping ◀──────────┴──(Lease lost, renewal overdue,┘
//	                                                      or shutdown)
//
// Only a leading replica has controllers, hence writers. A lost Lease ends the leadership,
// not the process: once its controllers have stopped, the replica stands by again with the
// same informers and caches, and leads again when it holds the Lease again.
type leadershipPhase int32

const (
	// phaseWarming: the informers fill their caches; the Lease is not asked for yet.
	phaseWarming leadershipPhase = iota
	// phaseStandingBy: asking for the Lease, which another replica may hold. Nothing writes.
	phaseStandingBy
	// phaseCatchingUp: the Lease is held; the informers are brought up to the API server's
	// state at the acquisition before any controller exists (see awaitCaughtUp).
	phaseCatchingUp
	// phaseLeading: the controllers run: a first full resync with SPIRE, then the workers.
	phaseLeading
	// phaseStopping: the leadership ended; its controllers are stopping. Liveness fails if
	// they take longer than termStopTimeout.
	phaseStopping
)

func (p leadershipPhase) String() string {
	switch p {
	case phaseWarming:
		return "warming"
	case phaseStandingBy:
		return "standing by"
	case phaseCatchingUp:
		return "catching up"
	case phaseLeading:
		return "leading"
	case phaseStopping:
		return "stopping"
	}
	return fmt.Sprintf("phase %d", int32(p))
}

var (
	// errLeadershipLost is the cause of the end of a leadership whose Lease was lost.
	errLeadershipLost = errors.New("lost the leader election lease")
	// errRenewalOverdue ends a leadership whose Lease was not renewed within renewDeadline:
	// before client-go gives it up, and before another replica may take it.
	errRenewalOverdue = fmt.Errorf("%w: not renewed within renewDeadline", errLeadershipLost)
	// errShuttingDown ends a leadership because the process is stopping.
	errShuttingDown = errors.New("shutting down")
)

// leaderElection campaigns for a Lease and runs a leadership, a term, each time this process
// holds it, for as long as the process runs.
type leaderElection struct {
	cfg       config.LeaderElection
	client    clientset.Interface
	namespace string
	// identity is the holder identity, the same for every campaign of the process: a replica
	// that finds the Lease still its own after an API server outage takes it back at once.
	identity string
	health   *Health
	// stopTimeout bounds a term's stop (termStopTimeout unless a test sets it).
	stopTimeout time.Duration
}

// newLeaderElection reads the Lease's namespace (the pod's unless the config names one) and
// makes the process's identity.
func newLeaderElection(client clientset.Interface, le config.LeaderElection, health *Health) (*leaderElection, error) {
	namespace := le.ResourceNamespace
	if namespace == "" {
		data, err := os.ReadFile(inClusterNamespaceFile)
		if err != nil {
			return nil, fmt.Errorf("leaderElection.resourceNamespace is required when not running in a pod: %w", err)
		}
		namespace = strings.TrimSpace(string(data))
	}
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("getting hostname for the leader election identity: %w", err)
	}
	if health == nil {
		health = &Health{}
	}
	// The hostname names the pod in logs; the UUID keeps two processes on one host distinct.
	return &leaderElection{cfg: le, client: client, namespace: namespace, identity: hostname + "_" + string(uuid.NewUUID()),
		health: health, stopTimeout: termStopTimeout}, nil
}

// term runs the controllers of one leadership until ctx ends, and returns once they have
// stopped writing. leaseRV is the resource version of the Lease just acquired: every change
// the API server made before the acquisition has a smaller one. lost is closed when the
// Lease is lost or its renewal overdue, even after ctx ended for a shutdown: the writes still
// in flight must then stop at once rather than be seen through. constructed reports whether it
// got as far as constructing the controllers; an error says they could not be.
type term func(ctx context.Context, leaseRV string, lost <-chan struct{}) (constructed bool, err error)

// run campaigns for the Lease and runs run for each leadership, until ctx ends. It returns
// nil then, or the error of the first leadership's construction (a config error, as at any
// start); a later leadership that fails to construct is retried after a while, since the
// same construction succeeded before.
func (e *leaderElection) run(ctx context.Context, run term) error {
	logger := klog.FromContext(ctx)
	constructed := false
	for {
		e.health.setPhase(phaseStandingBy)
		led, err := e.campaign(ctx, run)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err != nil && !constructed:
			return err
		case err != nil:
			logger.Error(err, "Constructing the controllers failed; campaigning again", "lease", klog.KRef(e.namespace, e.cfg.ResourceName), "after", e.cfg.LeaseDuration)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(e.cfg.LeaseDuration):
			}
		case led:
			constructed = true
			logger.Info("Leadership ended and its controllers stopped; standing by with the same caches", "lease", klog.KRef(e.namespace, e.cfg.ResourceName))
		}
	}
}

// campaign runs one client-go leader elector: it waits for the Lease, runs a term while it
// holds it, and returns once the leadership has ended and the term's controllers have
// stopped. led reports whether a term ran and constructed its controllers.
func (e *leaderElection) campaign(ctx context.Context, run term) (led bool, err error) {
	logger := klog.FromContext(ctx)
	base, err := resourcelock.New(resourcelock.LeasesResourceLock, e.namespace, e.cfg.ResourceName,
		e.client.CoreV1(), e.client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: e.identity})
	if err != nil {
		return false, fmt.Errorf("creating the leader election lock: %w", err)
	}
	terms := &termGuard{}
	lock := &guardedLock{Interface: base, identity: e.identity, beforeRelease: func() error {
		if !terms.stop(errLeadershipLost, e.stopTimeout) {
			return fmt.Errorf("not releasing the lease: the controllers have not stopped within %v", e.stopTimeout)
		}
		return nil
	}}
	// The elector releases the Lease when its context ends, or when it fails to renew; the
	// lock lets the release through only once the term has stopped (see guardedLock). The
	// elector runs on a context of its own, which ends once ctx has ended and the term has
	// returned, or once the term has ended on its own.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	stopOnShutdown := context.AfterFunc(ctx, func() {
		terms.stop(errShuttingDown, 0)
		stopElector()
	})
	defer stopOnShutdown()

	var termErr error
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.cfg.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				termCtx, cancel, done, ok := terms.begin(leading)
				if !ok {
					return
				}
				defer close(done)
				// A term that ends, for whatever reason, ends this elector too: if it still
				// holds the Lease (the renewal was only overdue), it releases it, and the next
				// campaign starts from a fresh observation of the Lease.
				defer stopElector()
				logger.Info("Became leader", "lease", klog.KRef(e.namespace, e.cfg.ResourceName), "identity", e.identity)
				var constructed bool
				constructed, termErr = e.runTerm(termCtx, cancel, lock, run)
				led = constructed
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(current string) {
				if current != e.identity {
					logger.Info("Standing by", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return false, fmt.Errorf("configuring leader election: %w", err)
	}
	logger.Info("Waiting for the leader election lease", "lease", klog.KRef(e.namespace, e.cfg.ResourceName), "identity", e.identity)
	elector.Run(electorCtx)
	// The elector does not wait for OnStartedLeading to return; this does.
	terms.close()
	return led, termErr
}

// runTerm runs one leadership: it fences it with the Lease's renewals, learns the Lease's
// resource version, runs run, and records in Health when it stops. constructed reports
// whether run got as far as constructing its controllers.
func (e *leaderElection) runTerm(ctx context.Context, cancel context.CancelCauseFunc, lock *guardedLock, run term) (constructed bool, err error) {
	logger := klog.FromContext(ctx)
	e.health.setPhase(phaseCatchingUp)
	lost := make(chan struct{})
	var lostOnce sync.Once
	markLost := func() { lostOnce.Do(func() { close(lost) }) }
	// The fence outlives the leadership's context: a shutdown that sees its writes through
	// must still stop them if the Lease is lost meanwhile.
	stopFence := fence(lock, e.cfg.RenewDeadline, func() {
		cancel(errRenewalOverdue)
		markLost()
	})
	defer stopFence()
	// Once the leadership ends, the term is stopping until run returns; Health bounds that.
	returned, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-returned:
			return
		case <-ctx.Done():
		}
		// Only a shutdown ends a leadership whose Lease is still held; client-go ending it
		// leaves context.Canceled as the cause.
		if !errors.Is(context.Cause(ctx), errShuttingDown) {
			markLost()
		}
		e.health.setPhase(phaseStopping)
		e.health.stopping(time.Now())
		logger.Info("Leadership ended; stopping the controllers", "lease", klog.KRef(e.namespace, e.cfg.ResourceName), "cause", context.Cause(ctx))
	}()
	defer func() {
		close(returned)
		<-watched
		e.health.stopping(time.Time{})
	}()

	var leaseRV string
	if err := wait.PollUntilContextCancel(ctx, e.cfg.RetryPeriod, true, func(ctx context.Context) (bool, error) {
		lease, err := e.client.CoordinationV1().Leases(e.namespace).Get(ctx, e.cfg.ResourceName, metav1.GetOptions{})
		if err != nil {
			logger.V(2).Info("Reading the lease just acquired", "err", err)
			return false, nil
		}
		leaseRV = lease.ResourceVersion
		return true, nil
	}); err != nil {
		return false, nil
	}
	return run(ctx, leaseRV, lost)
}

// fence calls overdue when the Lease has not been renewed for renewDeadline since the start of
// its last successful renewal. client-go gives a leadership up only a retryPeriod later, and
// another replica may take the Lease leaseDuration after it saw the renewal: this leaves
// leaseDuration - renewDeadline for the writes in flight to end. It returns the func that
// stops the fence.
func fence(lock *guardedLock, renewDeadline time.Duration, overdue func()) func() {
	fenceCtx, stop := context.WithCancel(context.Background())
	go func() {
		timer := time.NewTimer(renewDeadline)
		defer timer.Stop()
		for {
			wait := time.Until(lock.renewed().Add(renewDeadline))
			if wait <= 0 {
				overdue()
				return
			}
			timer.Reset(wait)
			select {
			case <-fenceCtx.Done():
				return
			case <-timer.C:
			}
		}
	}()
	return stop
}

// termGuard holds the running term of one campaign, so that the Lease's release and the
// process's shutdown can end it and wait for it.
type termGuard struct {
	mu     sync.Mutex
	closed bool
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// begin starts a term on the leadership's context, unless the campaign is over. The caller
// closes done when the term has stopped.
func (t *termGuard) begin(leading context.Context) (context.Context, context.CancelCauseFunc, chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithCancelCause(leading)
	t.cancel, t.done = cancel, make(chan struct{})
	return ctx, cancel, t.done, true
}

// stop ends the running term, if any, with cause (unless it ended already) and waits up to
// timeout (0: for ever) for it to stop. It reports whether no term is running any more.
func (t *termGuard) stop(cause error, timeout time.Duration) bool {
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if cancel == nil {
		return true
	}
	cancel(cause)
	if timeout <= 0 {
		<-done
		return true
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// close ends the campaign: no term begins any more, and it waits for the one running.
func (t *termGuard) close() {
	t.mu.Lock()
	t.closed = true
	done := t.done
	t.mu.Unlock()
	if done != nil {
		<-done
	}
}

// guardedLock is the Lease lock as leadership needs it. It records when this process last
// renewed the Lease, for the fence; and it lets client-go release the Lease only once the
// controllers of the leadership have stopped. client-go releases it (ReleaseOnCancel) before
// it cancels the leadership's context, both on shutdown and when a renewal fails; a release
// let through earlier would let another replica lead while this one still writes.
type guardedLock struct {
	resourcelock.Interface
	identity string
	// beforeRelease ends the leadership and waits for its controllers; an error refuses the
	// release, and the Lease then expires on its own.
	beforeRelease func() error

	mu sync.Mutex
	// renewedAt is when the last successful acquisition or renewal started.
	renewedAt time.Time
}

// Create creates the Lease, holding it when the record names this process.
func (l *guardedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	if err := l.Interface.Create(ctx, ler); err != nil {
		return err
	}
	l.record(ler, start)
	return nil
}

// Update writes the Lease: a renewal is recorded; a release (no holder) waits for the
// controllers to stop first.
func (l *guardedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" && l.beforeRelease != nil {
		if err := l.beforeRelease(); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := l.Interface.Update(ctx, ler); err != nil {
		return err
	}
	l.record(ler, start)
	return nil
}

func (l *guardedLock) record(ler resourcelock.LeaderElectionRecord, start time.Time) {
	if ler.HolderIdentity != l.identity {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if start.After(l.renewedAt) {
		l.renewedAt = start
	}
}

// renewed is when the last successful acquisition or renewal of the Lease started.
func (l *guardedLock) renewed() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewedAt
}
