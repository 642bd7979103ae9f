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

package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// apiServerOutage is how long TestLeaderSurvivesAPIServerOutage keeps kube-apiserver down:
// longer than a lease, and than the reflectors' 30 s (jittered to 60 s) backoff cap, so that
// the return is not helped by a lucky retry.
const apiServerOutage = 2 * time.Minute

// takeoverOutage is how long the API server is down in TestOutageEndsWithTheOtherLeading:
// several leases, so that both replicas know the Lease expired.
const takeoverOutage = 30 * time.Second

// registrationAfterOutage bounds how long after kube-apiserver is back a new pod waits for
// its entry.
const registrationAfterOutage = 10 * time.Second

// probeRecord is what a probe answered at a time.
type probeRecord struct {
	at   time.Time
	path string
	code int
	body string
}

// probeRecorder polls a replica's /healthz and /readyz as a kubelet would, only more often,
// and records every answer that was not 200.
type probeRecorder struct {
	mu       sync.Mutex
	probes   int
	failures []probeRecord
	stop     func()
	done     chan struct{}
}

func recordProbes(r *replica) *probeRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	p := &probeRecorder{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()
		for {
			for _, path := range []string{"/healthz", "/readyz"} {
				code, body := get(r.health + path)
				p.mu.Lock()
				p.probes++
				if code != http.StatusOK {
					p.failures = append(p.failures, probeRecord{at: time.Now(), path: path, code: code, body: strings.TrimSpace(body)})
				}
				p.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return p
}

// finish stops the recorder and fails the test for every probe that failed.
func (p *probeRecorder) finish(t *testing.T, name string) {
	t.Helper()
	p.stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("%s: %d probe answers, %d not 200", name, p.probes, len(p.failures))
	for _, f := range p.failures {
		t.Errorf("%s: %s answered %d at %s: %s", name, f.path, f.code, f.at.Format("15:04:05.000"), f.body)
	}
}

// exitedEarly fails the test if the replica's process has ended.
func exitedEarly(t *testing.T, name string, r *replica) {
	t.Helper()
	select {
	case <-r.done:
		err := <-r.exited
		r.exited <- err
		t.Fatalf("%s exited (%v): a kubelet would restart it with crash-loop back-off", name, err)
	default:
	}
}

// sleepWatching sleeps for d, failing the test as soon as one of the replicas exits.
func sleepWatching(t *testing.T, d time.Duration, replicas map[string]*replica) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for name, r := range replicas {
			exitedEarly(t, name, r)
		}
		time.Sleep(min(time.Second, time.Until(deadline)))
	}
	for name, r := range replicas {
		exitedEarly(t, name, r)
	}
}

// writesBy counts the entry writes in SPIRE's audit log made by the binary at path.
func writesBy(t *testing.T, server *realcluster.SPIRE, path string) int {
	t.Helper()
	n := 0
	for _, w := range auditWrites(t, server) {
		if w.caller == path {
			n++
		}
	}
	return n
}

// outageEnv is a cluster with one ClusterSPIFFEID for every pod of "default", a node, and
// SPIRE with its audit log on.
type outageEnv struct {
	t     *testing.T
	ctx   context.Context
	stack *realcluster.Stack
	node  string
}

func newOutageEnv(t *testing.T, timeout time.Duration) *outageEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SPIRE: realcluster.SPIREOptions{AuditLog: true}})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	node, err := realcluster.CreateNode(ctx, stack.Client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &outageEnv{t: t, ctx: ctx, stack: stack, node: node.Name}
}

func (e *outageEnv) createPods(prefix string, n int) {
	e.t.Helper()
	for i := range n {
		if _, err := realcluster.CreatePod(e.ctx, e.stack.Client, "default", fmt.Sprintf("%s-%d", prefix, i), e.node); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *outageEnv) poll(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		e.t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// converged reports whether every pod has exactly its entry.
func (e *outageEnv) converged() bool {
	return entriesDiff(e.ctx, e.t, e.stack.Client, e.stack.SPIRE) == ""
}

// hasEntry reports whether SPIRE holds the pod's entry.
func (e *outageEnv) hasEntry(pod string) bool {
	entries, err := e.stack.SPIRE.EntryShow(e.ctx)
	if err != nil {
		return false
	}
	for _, en := range entries {
		if en.SPIFFEID == "spiffe://example.org/pod/"+pod {
			return true
		}
	}
	return false
}

// leaseHolder is the Lease's holder identity, "" when it cannot be read.
func (e *outageEnv) leaseHolder(name string) string {
	l, err := e.stack.Client.CoordinationV1().Leases("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// TestLeaderSurvivesAPIServerOutage stops kube-apiserver for apiServerOutage under a
// leader-elected spire-registrar with the chart's lease timings. The process must not exit,
// must write nothing to SPIRE while the API server is away, and neither /healthz nor /readyz
// may fail for it; a pod created once the API server is back must get its entry within
// registrationAfterOutage.
func TestLeaderSurvivesAPIServerOutage(t *testing.T) {
	e := newOutageEnv(t, apiServerOutage+5*time.Minute)
	bin := copyBinary(t, realcluster.RegistrarBinary(t), "registrar")
	server := e.stack.SPIRE
	e.createPods("before", 5)
	const lease = "spire-registrar-outage"
	// The lease timings are the defaults, as the chart leaves them: 15 s, 10 s, 2 s.
	config := writeFile(t, fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: outage
spireServerSocketPath: %s
leaderElection:
  leaderElect: true
  resourceName: %s
  resourceNamespace: default
`, server.SocketPath(), lease))
	r := startReplica(t, bin, e.stack.Kube.Kubeconfig(), config)
	e.poll("the leader's first entries", time.Minute, e.converged)
	e.poll("ready", 30*time.Second, func() bool { code, _ := get(r.health + "/readyz"); return code == http.StatusOK })
	probes := recordProbes(r)

	// SPIRE's audit log counts the writes: one line per call, naming the caller's binary.
	before := writesBy(t, server, bin)
	stopped := time.Now()
	e.stack.Kube.StopAPIServer()
	t.Logf("kube-apiserver stopped (it took %v to exit); %d entry writes so far; waiting %v", time.Since(stopped).Round(time.Millisecond), before, apiServerOutage)
	sleepWatching(t, apiServerOutage, map[string]*replica{"spire-registrar": r})
	during := writesBy(t, server, bin) - before
	if !strings.Contains(r.logs.String(), "Leadership ended") {
		t.Errorf("the leader never gave up its lease during an outage of %v", apiServerOutage)
	}

	starting := time.Now()
	if err := e.stack.Kube.StartAPIServer(e.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("kube-apiserver away for %v in all; ready %v after its start", back.Sub(stopped).Round(time.Millisecond), back.Sub(starting).Round(time.Millisecond))
	if during != 0 {
		t.Errorf("%d entry writes to SPIRE while the API server was down", during)
	}
	e.createPods("after", 1)
	created := time.Now()
	e.poll("the new pod's entry", registrationAfterOutage+time.Minute, func() bool { return e.hasEntry("after-0") })
	registered := time.Now()
	t.Logf("a pod created %v after kube-apiserver was back got its entry %v after the return (%v after its creation)",
		created.Sub(back).Round(time.Millisecond), registered.Sub(back).Round(time.Millisecond), registered.Sub(created).Round(time.Millisecond))
	if registered.Sub(back) > registrationAfterOutage {
		t.Errorf("registration resumed %v after the API server returned, want within %v", registered.Sub(back).Round(time.Millisecond), registrationAfterOutage)
	}
	e.poll("every pod to have exactly its entry", time.Minute, e.converged)
	exitedEarly(t, "spire-registrar", r)
	probes.finish(t, "spire-registrar")
	logMilestones(t, "spire-registrar", r)
}

// TestOutageEndsWithTheOtherLeading runs two replicas on one SPIRE server with its audit log,
// which names each caller's binary. The API server goes away under replica-a, the leader; when
// it returns, replica-a still cannot reach it (a proxy keeps refusing), so replica-b takes the
// Lease and registers new pods. Then replica-a reaches the API server again and must stand by.
// Neither may exit or fail a probe, and replica-a must write nothing from the outage on: not
// while it cannot renew the Lease, not while replica-b holds it. gcInterval is short, so a
// replica-a still running its controllers would show in the audit log at once, deleting the
// entries of pods its cache never saw.
func TestOutageEndsWithTheOtherLeading(t *testing.T) {
	e := newOutageEnv(t, 5*time.Minute)
	bin := realcluster.RegistrarBinary(t)
	binA, binB := copyBinary(t, bin, "replica-a"), copyBinary(t, bin, "replica-b")
	server := e.stack.SPIRE
	const lease = "spire-registrar-takeover"
	config := writeFile(t, fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: takeover
spireServerSocketPath: %s
gcInterval: 2s
leaderElection:
  leaderElect: true
  resourceName: %s
  resourceNamespace: default
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
`, server.SocketPath(), lease))
	proxyA := realcluster.NewProxy(t, strings.TrimPrefix(e.stack.Kube.Host(), "https://"))
	a := startReplica(t, binA, realcluster.KubeconfigVia(t, e.stack.Kube.Kubeconfig(), proxyA.Addr()), config)
	e.poll("replica-a to lead", time.Minute, func() bool { return a.resyncs() > 0 })
	leaderA := e.leaseHolder(lease)
	b := startReplica(t, binB, e.stack.Kube.Kubeconfig(), config)
	e.poll("replica-b to stand by", time.Minute, func() bool { return strings.Contains(b.logs.String(), "Standing by") })
	e.createPods("first", 5)
	e.poll("replica-a to register the first pods", time.Minute, e.converged)
	replicas := map[string]*replica{"replica-a": a, "replica-b": b}
	probesA, probesB := recordProbes(a), recordProbes(b)

	aBefore := writesBy(t, server, binA)
	stopped := time.Now()
	e.stack.Kube.StopAPIServer()
	sleepWatching(t, takeoverOutage, replicas)
	proxyA.Block()
	if err := e.stack.Kube.StartAPIServer(e.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	var holder string
	e.poll("replica-b to take the Lease", time.Minute, func() bool {
		holder = e.leaseHolder(lease)
		return holder != "" && holder != leaderA
	})
	t.Logf("kube-apiserver down %v; replica-b (%s) holds the Lease %v after its return", back.Sub(stopped).Round(time.Millisecond), holder, time.Since(back).Round(time.Millisecond))
	e.createPods("second", 5)
	e.poll("replica-b to register the pods created after the outage", time.Minute, e.converged)

	if err := proxyA.Unblock(); err != nil {
		t.Fatal(err)
	}
	unblocked := time.Now()
	standingBy := strings.Count(a.logs.String(), "Standing by")
	e.poll("replica-a to see replica-b's leadership", time.Minute, func() bool {
		return strings.Count(a.logs.String(), "Standing by") > standingBy
	})
	t.Logf("replica-a stands by %v after it reaches the API server again", time.Since(unblocked).Round(time.Millisecond))
	e.createPods("third", 3)
	e.poll("replica-b to register pods while replica-a stands by", time.Minute, e.converged)
	// Several of replica-a's resync intervals: were its controllers running, they would act.
	sleepWatching(t, 8*time.Second, replicas)
	e.poll("every pod to have exactly its entry", time.Minute, e.converged)
	if h := e.leaseHolder(lease); h != holder {
		t.Errorf("the Lease moved to %q after replica-a came back", h)
	}

	aWrites, bWrites := writesBy(t, server, binA), writesBy(t, server, binB)
	t.Logf("SPIRE's audit log: replica-a %d entry writes before the outage, %d since; replica-b %d", aBefore, aWrites-aBefore, bWrites)
	if aWrites != aBefore {
		t.Errorf("replica-a wrote %d entries after the API server went away", aWrites-aBefore)
	}
	if bWrites == 0 {
		t.Errorf("replica-b never wrote: it did not take over")
	}
	writes := auditWrites(t, server)
	lastA, firstB := -1, -1
	for i, w := range writes {
		switch {
		case w.caller == binA:
			lastA = i
		case w.caller == binB && firstB < 0:
			firstB = i
		}
	}
	if firstB >= 0 && lastA > firstB {
		t.Errorf("replica-a wrote (audit write #%d) after replica-b's first write (#%d)", lastA, firstB)
	}
	exitedEarly(t, "replica-a", a)
	exitedEarly(t, "replica-b", b)
	probesA.finish(t, "replica-a")
	probesB.finish(t, "replica-b")
	logMilestones(t, "replica-a", a)
	logMilestones(t, "replica-b", b)
}

// logMilestones logs the replica's steps of leadership, in order.
func logMilestones(t *testing.T, name string, r *replica) {
	t.Helper()
	for _, line := range strings.Split(r.logs.String(), "\n") {
		for _, msg := range []string{"Leadership ended", "Became leader", "Informer caches caught up", "Standing by", "Stopped controller", "Full resync"} {
			if strings.Contains(line, msg) {
				t.Logf("%s: %s", name, line)
				break
			}
		}
	}
}
