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

package entry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/entry"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// The fault tests break one real component at a time — SPIRE, the controller itself,
// kube-apiserver — in the middle of work, and check that the controller ends where it would
// have ended without the fault: every pod with exactly one entry, nothing deleted that is
// still declared, and nothing written before it has a complete picture. Each logs how long it
// took to reconverge, measured from the moment the fault was lifted.

// waitReady waits until a launched controller completed its first sync with SPIRE.
func (e *itEnv) waitReady(rc *runningController, timeout time.Duration) {
	e.t.Helper()
	e.eventually("controller ready", timeout, func() (bool, error) { return rc.ready(), nil })
}

// newITEnvOn is newITEnv on a kube-apiserver of the test's own, for tests that restart it.
func newITEnvOn(t *testing.T, k *realcluster.Kube) *itEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	e := &itEnv{t: t, ctx: ctx, prefix: fmt.Sprintf("it%d", envCounter.Add(1))}
	var err error
	if e.kube, err = kubernetes.NewForConfig(k.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	if e.spireAPI, err = spireclientset.NewForConfig(k.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	e.spire = realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	if e.client, err = spire.Dial(ctx, e.spire.SocketPath()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Close() })
	return e
}

// podBulk is a batch of pods being created concurrently, as a Deployment scale-up does.
type podBulk struct {
	done    chan struct{}
	created atomic.Int64
	pods    []*corev1.Pod
	err     error
}

// startPodBulk creates n pods named <base>-<i> on node from `workers` goroutines and returns
// at once; wait returns them. Creation errors are collected, not fatal, since they happen off
// the test goroutine.
func (e *itEnv) startPodBulk(ns, node, base string, n, workers int) *podBulk {
	b := &podBulk{done: make(chan struct{}), pods: make([]*corev1.Pod, n)}
	next := atomic.Int64{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				p, err := realcluster.CreatePod(e.ctx, e.kube, ns, fmt.Sprintf("%s-%d", base, i), node)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				b.pods[i] = p
				b.created.Add(1)
			}
		})
	}
	go func() {
		wg.Wait()
		b.err = errors.Join(errs...)
		close(b.done)
	}()
	return b
}

// wait waits until every pod of the bulk has been created.
func (b *podBulk) wait(t *testing.T) []*corev1.Pod {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("creating pods did not finish in 2 minutes (%d created)", b.created.Load())
	}
	if b.err != nil {
		t.Fatalf("creating pods: %v", b.err)
	}
	return b.pods
}

// createPods creates n pods concurrently and waits for them.
func (e *itEnv) createPods(ns, node, base string, n int) []*corev1.Pod {
	e.t.Helper()
	return e.startPodBulk(ns, node, base, n, 8).wait(e.t)
}

// apiPodUID returns the pod UID an entry (as the API returns it) is scoped to.
func apiPodUID(en *spiretypes.Entry) types.UID {
	for _, s := range en.GetSelectors() {
		if s.GetType() == "k8s" && strings.HasPrefix(s.GetValue(), "pod-uid:") {
			return types.UID(strings.TrimPrefix(s.GetValue(), "pod-uid:"))
		}
	}
	return ""
}

// waitForOneEntryPerPod waits until SPIRE holds exactly one entry for each pod and no other
// entry, and logs how long that took.
func (e *itEnv) waitForOneEntryPerPod(pods []*corev1.Pod, timeout time.Duration) {
	e.t.Helper()
	start := time.Now()
	var last string
	e.eventually(fmt.Sprintf("one entry for each of %d pods", len(pods)), timeout, func() (bool, error) {
		es, err := e.client.ListEntries(e.ctx)
		if err != nil {
			// SPIRE may be coming back; keep polling.
			last = err.Error()
			return false, nil
		}
		perPod := map[types.UID]int{}
		for _, en := range es {
			perPod[apiPodUID(en)]++
		}
		missing, dups := 0, 0
		for _, p := range pods {
			switch perPod[p.UID] {
			case 0:
				missing++
			case 1:
			default:
				dups++
			}
		}
		last = fmt.Sprintf("%d entries, %d pods without one, %d with several", len(es), missing, dups)
		return len(es) == len(pods) && missing == 0 && dups == 0, nil
	})
	e.t.Logf("converged (%s) after %v", last, time.Since(start))
}

// requireOneEntryPerPod checks, with the CLI, that SPIRE holds exactly one entry per pod and
// nothing else, and returns the entries.
func (e *itEnv) requireOneEntryPerPod(pods []*corev1.Pod) []realcluster.Entry {
	e.t.Helper()
	entries := e.oracle()
	perPod := map[types.UID][]string{}
	for _, en := range entries {
		uid := types.UID("")
		for _, s := range en.Selectors {
			if s.Type == "k8s" && strings.HasPrefix(s.Value, "pod-uid:") {
				uid = types.UID(strings.TrimPrefix(s.Value, "pod-uid:"))
			}
		}
		perPod[uid] = append(perPod[uid], en.ID)
	}
	known := map[types.UID]bool{}
	for _, p := range pods {
		known[p.UID] = true
		if ids := perPod[p.UID]; len(ids) != 1 {
			e.t.Errorf("pod %s/%s (%s) has %d entries %v, want exactly 1", p.Namespace, p.Name, p.UID, len(ids), ids)
		}
	}
	for uid, ids := range perPod {
		if !known[uid] {
			e.t.Errorf("entries %v belong to no live pod (pod UID %q)", ids, uid)
		}
	}
	return entries
}

// bulkClusterSPIFFEID declares one entry per pod of a namespace.
func (e *itEnv) bulkClusterSPIFFEID(ns string) {
	e.t.Helper()
	e.clusterSPIFFEID("bulk-"+ns, spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}",
		NamespaceSelector: sel(map[string]string{"kubernetes.io/metadata.name": ns}),
	})
}

// TestFaultSPIREDownAtStart starts the controller while SPIRE is down: it must not become
// ready and must not write, then converge and become ready once SPIRE is back.
func TestFaultSPIREDownAtStart(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("down", nil)
	node := e.node("node")
	e.bulkClusterSPIFFEID(ns)
	pods := e.createPods(ns, node.Name, "p", 5)

	e.spire.Kill()
	rc := e.launchController(e.prefix, "", nil)
	// Long enough for several initial-resync attempts (100ms, 200ms, 400ms... backoff).
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if rc.ready() {
			t.Fatal("controller became ready while SPIRE was down")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := rc.calls.writes.Load(); n != 0 {
		t.Errorf("controller made %d SPIRE write calls while SPIRE was down, want 0", n)
	}
	if n := rc.calls.lists.Load(); n == 0 {
		t.Errorf("controller never tried to list SPIRE while it was down")
	}

	restart := time.Now()
	if err := e.spire.Restart(e.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("SPIRE restarted in %v", back.Sub(restart))
	e.waitReady(rc, time.Minute)
	t.Logf("controller ready %v after SPIRE was back", time.Since(back))
	e.waitForOneEntryPerPod(pods, time.Minute)
	t.Logf("reconverged %v after SPIRE was back", time.Since(back))
	e.requireOneEntryPerPod(pods)
}

// TestFaultSPIREKilledMidBulk SIGKILLs SPIRE while the controller registers 500 new pods and
// restarts it on the same datastore: writes in flight are lost or half-answered, and the
// retries plus the resync must end with exactly one entry per pod.
func TestFaultSPIREKilledMidBulk(t *testing.T) {
	const n = 500
	e := newITEnv(t)
	ns := e.namespace("bulk", nil)
	node := e.node("node")
	e.bulkClusterSPIFFEID(ns)
	rc := e.startController("gcInterval: 3s\n")

	bulk := e.startPodBulk(ns, node.Name, "p", n, 6)
	e.eventually("some entries written", time.Minute, func() (bool, error) { return rc.calls.writes.Load() >= n/4, nil })
	e.spire.Kill()
	killed := time.Now()
	t.Logf("SPIRE killed after %d pod creations and %d controller write calls", bulk.created.Load(), rc.calls.writes.Load())
	// Stay down while pods keep coming, so their syncs fail and are retried.
	time.Sleep(time.Second)
	if err := e.spire.Restart(e.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("SPIRE back %v after the kill (%d pods created so far)", back.Sub(killed), bulk.created.Load())
	pods := bulk.wait(t)
	e.waitForOneEntryPerPod(pods, 2*time.Minute)
	t.Logf("reconverged %v after SPIRE was back", time.Since(back))
	e.requireOneEntryPerPod(pods)
}

// TestFaultControllerStoppedMidBulk stops the controller while pods are being created and starts
// a new one: the new controller must pick up where the old one stopped, with no duplicates.
func TestFaultControllerStoppedMidBulk(t *testing.T) {
	const n = 500
	e := newITEnv(t)
	ns := e.namespace("bulk", nil)
	node := e.node("node")
	e.bulkClusterSPIFFEID(ns)
	first := e.startController("")

	// Few creating goroutines, so that pods are still coming when the controller stops.
	bulk := e.startPodBulk(ns, node.Name, "p", n, 2)
	e.eventually("some entries written", time.Minute, func() (bool, error) { return first.calls.writes.Load() >= 50, nil })
	first.stop()
	stopped := time.Now()
	t.Logf("controller stopped after %d pod creations and %d write calls", bulk.created.Load(), first.calls.writes.Load())
	if bulk.created.Load() == n {
		t.Logf("warning: every pod was created before the controller stopped; the bulk was not interrupted mid-creation")
	}

	second := e.launchController(e.prefix, "", nil)
	e.waitReady(second, time.Minute)
	t.Logf("second controller ready %v after the first stopped", time.Since(stopped))
	pods := bulk.wait(t)
	e.waitForOneEntryPerPod(pods, 2*time.Minute)
	t.Logf("reconverged %v after the first controller stopped", time.Since(stopped))
	e.requireOneEntryPerPod(pods)
}

// writeRecorder records every write the controller asks SPIRE for, so that tests can assert on
// what was attempted, not only on what SPIRE accepted.
type writeRecorder struct {
	spire.API
	mu      sync.Mutex
	written []*spiretypes.Entry
	deleted []string
}

func (r *writeRecorder) CreateEntries(ctx context.Context, es []*spiretypes.Entry) ([]spire.EntryResult, error) {
	r.mu.Lock()
	r.written = append(r.written, es...)
	r.mu.Unlock()
	return r.API.CreateEntries(ctx, es)
}

func (r *writeRecorder) UpdateEntries(ctx context.Context, es []*spiretypes.Entry, m *spiretypes.EntryMask) ([]spire.EntryResult, error) {
	r.mu.Lock()
	r.written = append(r.written, es...)
	r.mu.Unlock()
	return r.API.UpdateEntries(ctx, es, m)
}

func (r *writeRecorder) DeleteEntries(ctx context.Context, ids []string) ([]spire.DeleteResult, error) {
	r.mu.Lock()
	r.deleted = append(r.deleted, ids...)
	r.mu.Unlock()
	return r.API.DeleteEntries(ctx, ids)
}

// Probe passes the controller's probe on.
func (r *writeRecorder) Probe(ctx context.Context) error {
	return spire.Probe(ctx, r.API)
}

func (r *writeRecorder) deletes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.deleted...)
}

func (r *writeRecorder) writes() []*spiretypes.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*spiretypes.Entry(nil), r.written...)
}

// TestFaultKubeAPIServerRestart restarts kube-apiserver (etcd kept) under a running controller
// that resyncs every second: the informers must recover, no entry may be deleted or rewritten
// because the API was briefly gone, and a pod created afterwards must get its entry.
func TestFaultKubeAPIServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server; skipped with -short")
	}
	k := realcluster.NewKube(t, realcluster.KubeOptions{})
	dir, err := realcluster.CRDsDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.ApplyCRDs(t.Context(), k.RESTConfig(), dir); err != nil {
		t.Fatal(err)
	}
	e := newITEnvOn(t, k)
	ns := e.namespace("apiserver", nil)
	node := e.node("node")
	e.bulkClusterSPIFFEID(ns)
	pods := e.createPods(ns, node.Name, "p", 50)
	var rec *writeRecorder
	rc := e.launchController(e.prefix, "gcInterval: 1s\n", func(api spire.API) spire.API {
		rec = &writeRecorder{API: api}
		return rec
	})
	e.waitReady(rc, time.Minute)
	e.waitForOneEntryPerPod(pods, time.Minute)
	before := e.oracle()
	writesBefore := rc.calls.writes.Load()

	start := time.Now()
	if err := k.Restart(e.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("kube-apiserver restarted in %v", back.Sub(start))
	// A few resyncs run on the informers' caches while and after the API was away.
	time.Sleep(2 * time.Second)

	created := time.Now()
	late := e.pod(ns, "late", node.Name, nil)
	e.waitForOneEntryPerPod(append(pods, late), time.Minute)
	t.Logf("pod created after the restart registered %v after its creation (%v after kube-apiserver was back)",
		time.Since(created), time.Since(back))

	if d := rec.deletes(); len(d) != 0 {
		t.Errorf("controller deleted %d entries across the kube-apiserver restart: %v", len(d), d)
	}
	if n := rc.calls.writes.Load() - writesBefore; n != 1 {
		t.Errorf("controller made %d write calls across the restart, want 1 (the late pod's create)", n)
	}
	after := map[string]realcluster.Entry{}
	for _, en := range e.requireOneEntryPerPod(append(pods, late)) {
		after[en.ID] = en
	}
	for _, en := range before {
		got, ok := after[en.ID]
		switch {
		case !ok:
			t.Errorf("entry %s (%s) is gone after the restart", en.ID, en.SPIFFEID)
		case got.RevisionNumber != en.RevisionNumber:
			t.Errorf("entry %s was rewritten across the restart (revision %d, was %d)", en.ID, got.RevisionNumber, en.RevisionNumber)
		}
	}
}

// TestFaultPodsDeletedWhileSPIREDown deletes pods (grace period 0, as a kubelet finishing)
// while SPIRE is down, and creates one: once SPIRE is back the deleted pods' entries go and
// the new pod gets its entry.
func TestFaultPodsDeletedWhileSPIREDown(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("gone", nil)
	node := e.node("node")
	e.bulkClusterSPIFFEID(ns)
	pods := e.createPods(ns, node.Name, "p", 10)
	e.startController("gcInterval: 3s\n")
	e.waitForOneEntryPerPod(pods, time.Minute)

	e.spire.Kill()
	for _, p := range pods[:5] {
		if err := e.kube.CoreV1().Pods(ns).Delete(e.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	born := e.pod(ns, "born-while-down", node.Name, nil)
	// Long enough for the syncs of those events to fail and back off a few times.
	time.Sleep(2 * time.Second)
	if err := e.spire.Restart(e.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	remaining := append(append([]*corev1.Pod(nil), pods[5:]...), born)
	e.waitForOneEntryPerPod(remaining, time.Minute)
	t.Logf("deleted pods' entries removed and new pod registered %v after SPIRE was back", time.Since(back))
	e.requireOneEntryPerPod(remaining)
}

// TestFaultRestartAtSteadyStateWith2000Pods restarts the controller over 2,000 registered pods
// with nothing changed: the new controller must not write to SPIRE at all.
func TestFaultRestartAtSteadyStateWith2000Pods(t *testing.T) {
	const n = 2000
	e := newITEnv(t)
	ns := e.namespace("steady", nil)
	node := e.node("node")
	e.bulkClusterSPIFFEID(ns)
	start := time.Now()
	pods := e.createPods(ns, node.Name, "p", n)
	t.Logf("created %d pods in %v", n, time.Since(start))

	first := e.startController("")
	e.waitForOneEntryPerPod(pods, 2*time.Minute)
	before := e.oracle()
	first.stop()

	restart := time.Now()
	second := e.startController("")
	t.Logf("restart to ready over %d pods: %v", n, time.Since(restart))
	// Every pod is queued by the informers' initial adds; let the workers go through them.
	time.Sleep(3 * time.Second)
	second.stop()
	if w := second.calls.writes.Load(); w != 0 {
		t.Errorf("restart at steady state made %d SPIRE write calls, want 0", w)
	}
	if l := second.calls.lists.Load(); l != 1 {
		t.Errorf("restart listed SPIRE %d times, want 1 (the initial resync)", l)
	}
	revisions := map[string]int64{}
	for _, en := range before {
		revisions[en.ID] = en.RevisionNumber
	}
	after := e.requireOneEntryPerPod(pods)
	for _, en := range after {
		if rev, ok := revisions[en.ID]; !ok || rev != en.RevisionNumber {
			t.Errorf("entry %s changed across the restart (revision %d, was %d, existed %v)", en.ID, en.RevisionNumber, rev, ok)
		}
	}
}

// TestFaultForeignEntriesNeverTouched adds to the ownership tests what they leave out: with an
// entry ID prefix and entryIDPrefixCleanup "" (the migration that deletes every unprefixed
// entry), a join-token agent entry — whose SPIRE-made ID has no dot either — survives; an entry
// of another prefix that duplicates what this controller declares is reported, not taken over;
// and an entry of another prefix carrying a managed pod's UID is neither adopted nor deleted.
func TestFaultForeignEntriesNeverTouched(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("foreign", nil)
	node := e.node("node")
	dup := e.pod(ns, "dup", node.Name, nil)
	shared := e.pod(ns, "shared", node.Name, nil)
	e.bulkClusterSPIFFEID(ns)
	if _, err := e.spire.CLI(e.ctx, "token generate", "-spiffeID", "spiffe://example.org/agent/by-token"); err != nil {
		t.Fatalf("token generate: %v", err)
	}
	td := func(path string) *spiretypes.SPIFFEID {
		return &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: path}
	}
	parent := td("/spire/agent/k8s_psat/it/" + string(node.UID))
	podSel := func(p *corev1.Pod) *spiretypes.Selector {
		return &spiretypes.Selector{Type: "k8s", Value: "pod-uid:" + string(p.UID)}
	}
	foreign := []*spiretypes.Entry{
		// Exactly what this controller declares for dup, under another owner's prefix.
		{Id: "other.dup", SpiffeId: td("/ns/" + ns + "/pod/dup"), ParentId: parent, Selectors: []*spiretypes.Selector{podSel(dup)}},
		// Another owner's entry for the same pod, with another SPIFFE ID.
		{Id: "other.shared", SpiffeId: td("/other/shared"), ParentId: parent, Selectors: []*spiretypes.Selector{podSel(shared)}},
	}
	if res, err := e.client.CreateEntries(e.ctx, foreign); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("seeding foreign entries: %v %v", err, res)
	}
	seeded := map[string]realcluster.Entry{}
	for _, en := range e.oracle() {
		seeded[en.ID] = en
	}

	// Ready although dup's entry cannot be written (see TestFaultUnwritableEntryDoesNotBlockStartup).
	e.startController("entryIDPrefix: mine\nentryIDPrefixCleanup: \"\"\ngcInterval: 1s\n")
	e.eventually("shared pod registered under our prefix", 30*time.Second, func() (bool, error) {
		for _, en := range e.entries() {
			if strings.HasPrefix(en.GetId(), "mine.") && apiPodUID(en) == shared.UID {
				return true, nil
			}
		}
		return false, nil
	})
	// Several resyncs over the foreign entries.
	time.Sleep(3 * time.Second)

	got := map[string]realcluster.Entry{}
	var mine []string
	for _, en := range e.oracle() {
		got[en.ID] = en
		if strings.HasPrefix(en.ID, "mine.") {
			mine = append(mine, en.SPIFFEID)
		}
	}
	for id, was := range seeded {
		now, ok := got[id]
		switch {
		case !ok:
			t.Errorf("foreign entry %s (%s) was deleted", id, was.SPIFFEID)
		case now.RevisionNumber != was.RevisionNumber:
			t.Errorf("foreign entry %s (%s) was rewritten (revision %d, was %d)", id, was.SPIFFEID, now.RevisionNumber, was.RevisionNumber)
		}
	}
	want := "spiffe://example.org/ns/" + ns + "/pod/shared"
	if len(mine) != 1 || mine[0] != want {
		t.Errorf("our entries = %v, want only %s (dup's is held by another owner)", mine, want)
	}
}

// TestFaultUnwritableEntryDoesNotBlockStartup starts the controller while one declared entry
// cannot be written — a ClusterSPIFFEID federates with a trust domain whose bundle SPIRE does
// not have yet, which SPIRE refuses per entry — and checks that this one failure stays that
// pod's problem: the controller becomes ready, registers the other pods, and handles new ones.
func TestFaultUnwritableEntryDoesNotBlockStartup(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("unwritable", nil)
	node := e.node("node")
	e.pod(ns, "good", node.Name, map[string]string{"app": "good"})
	e.pod(ns, "federated", node.Name, map[string]string{"app": "federated"})
	e.clusterSPIFFEID("good", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/good/{{ .PodMeta.Name }}",
		NamespaceSelector: sel(map[string]string{"kubernetes.io/metadata.name": ns}), PodSelector: sel(map[string]string{"app": "good"}),
	})
	// partner.org has no bundle in SPIRE (no ClusterFederatedTrustDomain fetched it yet).
	fed := e.clusterSPIFFEID("federated", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/federated/{{ .PodMeta.Name }}",
		NamespaceSelector: sel(map[string]string{"kubernetes.io/metadata.name": ns}), PodSelector: sel(map[string]string{"app": "federated"}),
		FederatesWith: []string{"partner.org"},
	})

	start := time.Now()
	rc := e.launchController(e.prefix, "", nil)
	e.waitForSPIFFEIDs("spiffe://example.org/good/good")
	e.eventually("controller ready although one entry cannot be written", 30*time.Second, func() (bool, error) {
		return rc.ready(), nil
	})
	t.Logf("ready %v after start", time.Since(start))
	e.pod(ns, "later", node.Name, map[string]string{"app": "good"})
	e.waitForSPIFFEIDs("spiffe://example.org/good/good", "spiffe://example.org/good/later")
	want := spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 1, EntriesToSet: 1, EntryFailures: 1}
	var got spirev1alpha1.ClusterSPIFFEIDStats
	e.eventually("the refused entry reported in the status", 30*time.Second, func() (bool, error) {
		clusterSPIFFEID, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, fed.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = clusterSPIFFEID.Status.Stats
		if got != want {
			return false, fmt.Errorf("stats %+v, want %+v", got, want)
		}
		return true, nil
	})
}

// TestHostileTemplatesCannotLeaveTheTrustDomain runs, through the real kube-apiserver and
// SPIRE, ClusterSPIFFEIDs and pods written to make the controller register a SPIFFE ID or
// parent ID outside its trust domain: tricky literal templates (the ClusterSPIFFEID author),
// templates that copy pod labels and annotations (the pod author), and a parentIDTemplate that
// reads a node annotation. The controller must refuse every one — not only must SPIRE end up
// clean, the controller must never even ask SPIRE to write such an entry.
func TestHostileTemplatesCannotLeaveTheTrustDomain(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("hostile", nil)
	node := e.node("node")
	nsSel := sel(map[string]string{"kubernetes.io/metadata.name": ns})
	mkPod := func(name string, labels, annotations map[string]string) {
		t.Helper()
		if _, err := realcluster.CreatePod(e.ctx, e.kube, ns, name, node.Name, func(p *corev1.Pod) {
			p.Labels, p.Annotations = labels, annotations
		}); err != nil {
			t.Fatal(err)
		}
	}

	// Render failures each hostile identity must end up reporting, by name.
	wantFailures := map[string]int{}
	// The ClusterSPIFFEID author's own tricks, one identity and one pod each.
	for i, tmpl := range []string{
		"spiffe://evil.org/{{ .PodMeta.Name }}",
		"spiffe://{{ .TrustDomain }}.evil.com/x",
		"spiffe://{{ .TrustDomain }}@evil.com/x",
		"spiffe://evil.com@{{ .TrustDomain }}/x",
		"spiffe://{{ .TrustDomain }}:8443/x",
		"spiffe://EXAMPLE.ORG/x",
		"spiffe://example%2Eorg/x",
		"spiffe://{{ .TrustDomain }}%2Eevil.com/x",
		"spiffe://{{ .TrustDomain }}/%2e%2e/x",
		"spiffe://{{ .TrustDomain }}/../x",
		"spiffe:///x",
		"spiffe://example.org.evil.com/x",
	} {
		role := fmt.Sprintf("author-%d", i)
		clusterSPIFFEID := e.clusterSPIFFEID(role, spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tmpl, NamespaceSelector: nsSel,
			PodSelector: sel(map[string]string{"role": role})})
		wantFailures[clusterSPIFFEID.Name] = 1
		mkPod(role, map[string]string{"role": role}, nil)
	}
	// Templates that copy what a pod's author writes.
	// The CRD only insists that the template starts with spiffe://; the rest comes from the pod.
	data := e.clusterSPIFFEID("data", spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: `spiffe://{{ index .PodMeta.Annotations "id" }}`,
		NamespaceSelector: nsSel, PodSelector: sel(map[string]string{"role": "data"})})
	dataIDs := []string{"evil.org/x", "example.org.evil.com/x", "example.org@evil.com/x", "evil.com@example.org/x",
		"EXAMPLE.ORG/x", "example.org/x\nspiffe://evil.org/y", `evil.org\@example.org/x`, "example.org%2Eevil.com/x",
		"example.org/%2e%2e/x", "example.org:443/x", "/evil.org/x"}
	for i, id := range dataIDs {
		mkPod(fmt.Sprintf("data-%d", i), map[string]string{"role": "data"}, map[string]string{"id": id})
	}
	wantFailures[data.Name] = len(dataIDs)
	mkPod("data-ok", map[string]string{"role": "data"}, map[string]string{"id": "example.org/data/ok"})
	label := e.clusterSPIFFEID("label", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  `spiffe://{{ index .PodMeta.Labels "td" }}{{ with index .PodMeta.Labels "sub" }}.{{ . }}{{ end }}/x`,
		NamespaceSelector: nsSel, PodSelector: sel(map[string]string{"role": "label"})})
	mkPod("label-td", map[string]string{"role": "label", "td": "evil.org"}, nil)
	mkPod("label-sub", map[string]string{"role": "label", "td": "example.org", "sub": "evil.com"}, nil)
	wantFailures[label.Name] = 2
	// The operator's parentIDTemplate lets a node name the parent of its pods (the template sees
	// only the node, as in spire-controller-manager); nodes abuse it.
	benign := e.clusterSPIFFEID("benign", spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ok/{{ .PodMeta.Name }}",
		NamespaceSelector: nsSel, PodSelector: sel(map[string]string{"role": "benign"})})
	parents := []string{"spiffe://evil.org/agent", "spiffe://example.org.evil.com/agent", "spiffe://EXAMPLE.ORG/agent",
		"spiffe://example.org@evil.org/agent"}
	for i, parent := range parents {
		evilNode, err := realcluster.CreateNode(e.ctx, e.kube, e.name(fmt.Sprintf("evil-node-%d", i)), func(n *corev1.Node) {
			n.Annotations = map[string]string{"parent": parent}
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := realcluster.CreatePod(e.ctx, e.kube, ns, fmt.Sprintf("parent-%d", i), evilNode.Name, func(p *corev1.Pod) {
			p.Labels = map[string]string{"role": "benign"}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wantFailures[benign.Name] = len(parents)
	mkPod("benign", map[string]string{"role": "benign"}, nil)

	var rec *writeRecorder
	rc := e.launchController(e.prefix,
		`parentIDTemplate: '{{ with index .NodeMeta.Annotations "parent" }}{{ . }}{{ else }}spiffe://{{ $.TrustDomain }}/k8s-node/{{ $.NodeMeta.Name }}{{ end }}'`+"\n",
		func(api spire.API) spire.API {
			rec = &writeRecorder{API: api}
			return rec
		})
	e.waitReady(rc, time.Minute)
	e.waitForSPIFFEIDs("spiffe://example.org/ok/benign", "spiffe://example.org/data/ok")
	for name, want := range wantFailures {
		e.eventually("render failures reported by "+name, 30*time.Second, func() (bool, error) {
			clusterSPIFFEID, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, name, metav1.GetOptions{})
			return err == nil && clusterSPIFFEID.Status.Stats.PodEntryRenderFailures == want, err
		})
	}

	td := "spiffe://example.org/"
	t.Logf("the controller asked SPIRE to write %d entries", len(rec.writes()))
	for _, en := range rec.writes() {
		for field, id := range map[string]*spiretypes.SPIFFEID{"SPIFFE ID": en.GetSpiffeId(), "parent ID": en.GetParentId()} {
			if id.GetTrustDomain() != "example.org" {
				t.Errorf("controller asked SPIRE to write an entry with %s %q", field, "spiffe://"+id.GetTrustDomain()+id.GetPath())
			}
		}
	}
	for _, en := range e.oracle() {
		if !strings.HasPrefix(en.SPIFFEID, td) || !strings.HasPrefix(en.ParentID, td) {
			t.Errorf("SPIRE holds entry %s with SPIFFE ID %q, parent ID %q", en.ID, en.SPIFFEID, en.ParentID)
		}
	}
}

// TestInitialResyncListFailingMidPaginationWritesNothing is a unit test (fake clientsets, the
// in-process SPIRE fake), since a real SPIRE server cannot be made to fail between two pages
// of one listing. It is TestFailedListDeletesNothing for the start-up path: the first full list
// breaks after its first page, when the controller has seen one pod's entry but not the
// other's nor the orphan. Acting on that picture would create the unseen entry a second time.
// The controller must retry the whole list and then write only what the full picture needs —
// here, deleting the orphan.
func TestInitialResyncListFailingMidPaginationWritesNothing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mkPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: "node-1"}}
	}
	a, b := mkPod("a"), mkPod("b")
	kube := k8sfake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, a, b)
	spireAPI := spirefake.NewSimpleClientset(&spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "apps", Generation: 1},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	})
	fake := spiretest.New(t)
	td := func(path string) *spiretypes.SPIFFEID {
		return &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: path}
	}
	podEntry := func(id string, p *corev1.Pod) *spiretypes.Entry {
		return &spiretypes.Entry{Id: id, SpiffeId: td("/pod/" + p.Name), ParentId: td("/node/node-1"),
			Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:" + string(p.UID)}}}
	}
	// Listed in this order, one per page.
	fake.SetEntries(podEntry("entry-a", a), podEntry("entry-b", b),
		&spiretypes.Entry{Id: "orphan", SpiffeId: td("/orphan"), ParentId: td("/node/node-1"),
			Selectors: []*spiretypes.Selector{{Type: "unix", Value: "uid:0"}}})
	client, err := spire.Dial(ctx, fake.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.PageSize = 1
	fake.FailListAfterPages(1)

	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	spireInformers := spireinformers.NewSharedInformerFactory(spireAPI, 0)
	c, err := entry.NewController(ctx,
		kubeInformers.Core().V1().Pods(), kubeInformers.Core().V1().Namespaces(), kubeInformers.Core().V1().Nodes(),
		kubeInformers.Discovery().V1().EndpointSlices(),
		spireInformers.Spire().V1alpha1().ClusterSPIFFEIDs(), spireInformers.Spire().V1alpha1().ClusterStaticEntries(),
		nil, nil, spireAPI, client, entry.Options{
			Settings: render.Settings{
				TrustDomain:      spiffeid.RequireTrustDomainFromString("example.org"),
				ParentIDTemplate: "spiffe://{{ .TrustDomain }}/node/{{ .NodeMeta.Name }}",
			},
			ResyncInterval: time.Hour,
		})
	if err != nil {
		t.Fatal(err)
	}
	kubeInformers.Start(ctx.Done())
	spireInformers.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx, 2) })
	defer func() {
		cancel()
		wg.Wait()
		kubeInformers.Shutdown()
		spireInformers.Shutdown()
	}()

	deadline := time.Now().Add(30 * time.Second)
	for !c.HasSynced() {
		if time.Now().After(deadline) {
			t.Fatal("controller never completed its initial resync")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The pods' syncs, queued by the informers, must find nothing to do either.
	time.Sleep(500 * time.Millisecond)

	// One broken listing (two calls) and one complete one (four calls, ending on an empty page).
	if n := fake.Calls(spiretest.MethodListEntries); n < 6 {
		t.Errorf("ListEntries called %d times; the injected failure did not happen as planned", n)
	}
	for _, m := range []string{spiretest.MethodBatchCreateEntry, spiretest.MethodBatchUpdateEntry} {
		if n := fake.Calls(m); n != 0 {
			t.Errorf("%s called %d times, want 0: the controller acted on a partial list", m, n)
		}
	}
	if n := fake.Calls(spiretest.MethodBatchDeleteEntry); n != 1 {
		t.Errorf("BatchDeleteEntry called %d times, want 1 (the orphan)", n)
	}
	var ids []string
	for _, en := range fake.Entries() {
		ids = append(ids, en.GetId())
	}
	if strings.Join(ids, ",") != "entry-a,entry-b" {
		t.Errorf("SPIRE holds %v, want entry-a,entry-b", ids)
	}
}
