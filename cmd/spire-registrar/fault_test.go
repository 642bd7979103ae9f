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
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// The binary's fault tests: the same faults as pkg/controller/entry's, against the built
// binary, which adds what the in-process harness leaves out — the batching SPIRE writer,
// /readyz, and a process that dies with SIGKILL rather than a cancelled context.

// faultEnv is a real kube-apiserver and SPIRE server with one ClusterSPIFFEID that registers
// every pod of the "default" namespace.
type faultEnv struct {
	t      *testing.T
	ctx    context.Context
	bin    string
	kube   *realcluster.Kube
	client kubernetes.Interface
	spire  *realcluster.SPIRE
	api    *spire.Client
	node   string
	config string
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	_, ctx := ktesting.NewTestContext(t)
	e := &faultEnv{t: t, ctx: ctx, bin: realcluster.RegistrarBinary(t)}
	e.kube = realcluster.NewKube(t, realcluster.KubeOptions{})
	dir, err := realcluster.CRDsDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.ApplyCRDs(ctx, e.kube.RESTConfig(), dir); err != nil {
		t.Fatal(err)
	}
	e.spire = realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	if e.api, err = spire.Dial(ctx, e.spire.SocketPath()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.api.Close() })
	if e.client, err = e.kube.Client(); err != nil {
		t.Fatal(err)
	}
	spireAPI, err := spireclientset.NewForConfig(e.kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	node, err := realcluster.CreateNode(ctx, e.client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	e.node = node.Name
	if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.config = writeFile(t, "trustDomain: example.org\nclusterName: it\ngcInterval: 3s\nspireServerSocketPath: "+e.spire.SocketPath()+"\n")
	return e
}

// start runs the binary with health and metrics endpoints; it is killed at the end of the test.
func (e *faultEnv) start() *replica {
	e.t.Helper()
	return startReplica(e.t, e.bin, e.kube.Kubeconfig(), e.config)
}

func (e *faultEnv) poll(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		e.t.Fatalf("timed out waiting for %s", what)
	}
}

// createPods creates n pods in "default" from a few goroutines, returning at once; the
// returned function waits for them.
func (e *faultEnv) createPods(n int, created *atomic.Int64) func() []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				p, err := realcluster.CreatePod(e.ctx, e.client, "default", fmt.Sprintf("p-%d", i), e.node)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				pods[i] = p
				created.Add(1)
			}
		})
	}
	return func() []*corev1.Pod {
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			e.t.Fatalf("creating pods: %v", err)
		}
		return pods
	}
}

// oneEntryPerPod reports whether SPIRE holds exactly one entry for each pod and nothing else.
func (e *faultEnv) oneEntryPerPod(pods []*corev1.Pod) (bool, string) {
	entries, err := e.api.ListEntries(e.ctx)
	if err != nil {
		return false, err.Error()
	}
	perPod := map[types.UID]int{}
	for _, en := range entries {
		for _, s := range en.GetSelectors() {
			if s.GetType() == "k8s" && strings.HasPrefix(s.GetValue(), "pod-uid:") {
				perPod[types.UID(strings.TrimPrefix(s.GetValue(), "pod-uid:"))]++
			}
		}
	}
	bad := 0
	for _, p := range pods {
		if perPod[p.UID] != 1 {
			bad++
		}
	}
	return len(entries) == len(pods) && bad == 0, fmt.Sprintf("%d entries, %d pods without exactly one", len(entries), bad)
}

// TestBinarySPIREDownAtStartup starts the binary while SPIRE is down: it must stay alive but
// not ready and register nothing, then become ready and register the pods once SPIRE is back.
func TestBinarySPIREDownAtStartup(t *testing.T) {
	e := newFaultEnv(t)
	var created atomic.Int64
	pods := e.createPods(5, &created)()
	e.spire.Kill()

	r := e.start()
	e.poll("health endpoint up", 30*time.Second, func() bool {
		code, _ := get(r.health + "/healthz")
		return code == http.StatusOK
	})
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if code, body := get(r.health + "/readyz"); code == http.StatusOK {
			t.Fatalf("ready while SPIRE is down: %s", body)
		}
		if code, body := get(r.health + "/healthz"); code != http.StatusOK {
			t.Fatalf("not alive while SPIRE is down (a liveness probe would restart it in a loop): %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := e.spire.Restart(e.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if es, err := e.spire.EntryShow(e.ctx); err != nil || len(es) != 0 {
		t.Fatalf("SPIRE holds %d entries (%v) right after restart; nothing could have been written while it was down", len(es), err)
	}
	e.poll("ready", time.Minute, func() bool {
		code, _ := get(r.health + "/readyz")
		return code == http.StatusOK
	})
	t.Logf("ready %v after SPIRE was back", time.Since(back))
	var last string
	e.poll("one entry per pod", time.Minute, func() bool {
		ok, state := e.oneEntryPerPod(pods)
		last = state
		return ok
	})
	t.Logf("reconverged (%s) %v after SPIRE was back", last, time.Since(back))
}

// TestBinaryKilledMidBulkAndRestarted SIGKILLs the binary while it registers 500 new pods
// through its batching writer, and starts another: no pod may end with no entry or two.
func TestBinaryKilledMidBulkAndRestarted(t *testing.T) {
	const n = 500
	e := newFaultEnv(t)
	first := e.start()
	e.poll("first replica ready", time.Minute, func() bool {
		code, _ := get(first.health + "/readyz")
		return code == http.StatusOK
	})

	var created atomic.Int64
	waitPods := e.createPods(n, &created)
	e.poll("some entries written", time.Minute, func() bool {
		es, err := e.api.ListEntries(e.ctx)
		return err == nil && len(es) >= n/5
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	killed := time.Now()
	es, _ := e.api.ListEntries(e.ctx)
	t.Logf("killed the binary with %d pods created and %d entries in SPIRE", created.Load(), len(es))

	second := e.start()
	pods := waitPods()
	var last string
	e.poll("one entry per pod", 2*time.Minute, func() bool {
		ok, state := e.oneEntryPerPod(pods)
		last = state
		return ok
	})
	t.Logf("reconverged (%s) %v after the kill", last, time.Since(killed))
	// The entries are written by the second replica's first resync, which reports ready once
	// it has returned: shortly after the last write.
	e.poll("the second replica ready", 30*time.Second, func() bool {
		code, _ := get(second.health + "/readyz")
		return code == http.StatusOK
	})
	seen := map[string]bool{}
	entries, err := e.spire.EntryShow(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if seen[en.SPIFFEID] {
			t.Errorf("duplicate entry for %s", en.SPIFFEID)
		}
		seen[en.SPIFFEID] = true
	}
	if len(entries) != n {
		t.Errorf("SPIRE holds %d entries, want %d", len(entries), n)
	}
}
