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
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// auditWrite is one entry write in SPIRE's audit log, attributed to the binary that made it.
type auditWrite struct {
	method, caller string
}

var (
	auditMethod = regexp.MustCompile(` method=(Batch(?:Create|Update|Delete)Entry)\b`)
	auditCaller = regexp.MustCompile(` caller_path="?([^" ]+)"?`)
)

// auditWrites reads, in SPIRE's order, the entry writes its audit log recorded.
func auditWrites(t *testing.T, server *realcluster.SPIRE) []auditWrite {
	t.Helper()
	log, err := server.Log()
	if err != nil {
		t.Fatal(err)
	}
	var out []auditWrite
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "type=audit") {
			continue
		}
		m, c := auditMethod.FindStringSubmatch(line), auditCaller.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if c == nil {
			t.Fatalf("audit line without caller_path: %s", line)
		}
		out = append(out, auditWrite{method: m[1], caller: c[1]})
	}
	return out
}

// copyBinary puts bin at dir/name, so that SPIRE's audit log tells the replicas apart.
func copyBinary(t *testing.T, bin, name string) string {
	t.Helper()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHandOffDuringABulk stops the leader with SIGTERM while several hundred pods are being
// registered and a write of its own is held up inside SPIRE (spire-server frozen with SIGSTOP).
// The leader must keep the Lease, renewing it, until that write has ended, and only then
// release it; SPIRE's own audit log, which names each caller's binary, must show no write of
// the old leader after the new leader's first.
func TestHandOffDuringABulk(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	binA, binB := copyBinary(t, bin, "replica-a"), copyBinary(t, bin, "replica-b")
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SPIRE: realcluster.SPIREOptions{AuditLog: true}})
	client, server := stack.Client, stack.SPIRE
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const lease = "spire-registrar-handoff"
	config := writeFile(t, fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: handoff
spireServerSocketPath: %s
leaderElection:
  leaderElect: true
  resourceName: %s
  resourceNamespace: default
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
`, server.SocketPath(), lease))
	start := func(bin string) *replica { return startReplica(t, bin, stack.Kube.Kubeconfig(), config) }
	poll := func(what string, timeout time.Duration, cond func() (bool, error)) {
		t.Helper()
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			ok, err := cond()
			last = err
			return ok, nil
		}); err != nil {
			t.Fatalf("timed out waiting for %s (last: %v)", what, last)
		}
	}
	holder := func() (string, time.Time, error) {
		l, err := client.CoordinationV1().Leases("default").Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return "", time.Time{}, err
		}
		var renewed time.Time
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.Time
		}
		return ptr.Deref(l.Spec.HolderIdentity, ""), renewed, nil
	}

	a := start(binA)
	poll("replica-a to lead and sync", time.Minute, func() (bool, error) { return a.resyncs() > 0, nil })
	leaderA, _, err := holder()
	if err != nil {
		t.Fatal(err)
	}
	b := start(binB)
	poll("replica-b to stand by", time.Minute, func() (bool, error) { return strings.Contains(b.logs.String(), "Standing by"), nil })

	const pods = 400
	var created atomic.Int64
	bulkDone := make(chan error, 1)
	go func() {
		for i := range pods {
			if _, err := realcluster.CreatePod(ctx, client, "default", fmt.Sprintf("bulk-%d", i), node.Name); err != nil {
				bulkDone <- err
				return
			}
			created.Add(1)
		}
		bulkDone <- nil
	}()
	poll("replica-a to register part of the bulk", time.Minute, func() (bool, error) {
		es, err := server.EntryShow(ctx)
		return len(es) >= 100, err
	})
	// Writes of replica-a's that SPIRE receives from now on stay in flight until Thaw.
	if err := server.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozenAt := created.Load()
	poll("pods for replica-a to write while SPIRE is frozen", time.Minute, func() (bool, error) {
		return created.Load() >= frozenAt+20, nil
	})
	sigterm := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var holderAfter string
	poll("replica-a to renew the Lease after SIGTERM, or to give it up", 20*time.Second, func() (bool, error) {
		h, renewed, err := holder()
		holderAfter = h
		return err == nil && (h != leaderA || renewed.After(sigterm)), err
	})
	if holderAfter != leaderA {
		_ = server.Thaw()
		t.Fatalf("replica-a gave up the Lease (holder now %q) while a write of its own was still in flight", holderAfter)
	}
	t.Logf("replica-a still holds and renews the Lease %v after SIGTERM, its writes in flight", time.Since(sigterm).Round(time.Millisecond))
	if err := server.Thaw(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.exited:
		if err != nil {
			t.Fatalf("replica-a exited with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("replica-a did not exit within a minute of SPIRE's thaw")
	}
	t.Logf("replica-a exited %v after SIGTERM", time.Since(sigterm).Round(time.Millisecond))
	if err := <-bulkDone; err != nil {
		t.Fatal(err)
	}
	poll("replica-b to register every pod exactly once", 2*time.Minute, func() (bool, error) {
		diff := entriesDiff(ctx, t, client, server)
		return diff == "", fmt.Errorf("%s", diff)
	})

	writes := auditWrites(t, server)
	lastA, firstB := -1, -1
	var byA, byB int
	for i, w := range writes {
		switch w.caller {
		case binA:
			lastA = i
			byA++
		case binB:
			if firstB < 0 {
				firstB = i
			}
			byB++
		default:
			t.Errorf("audit write %d by %q, neither replica", i, w.caller)
		}
	}
	t.Logf("SPIRE's audit log: %d entry writes by replica-a, then %d by replica-b; replica-a's last is #%d, replica-b's first #%d",
		byA, byB, lastA, firstB)
	if byA == 0 || byB == 0 {
		t.Fatalf("the bulk was not split between the replicas (%d by a, %d by b)", byA, byB)
	}
	if lastA > firstB {
		t.Errorf("replica-a wrote (audit write #%d, %s) after replica-b's first write (#%d)", lastA, writes[lastA].method, firstB)
	}
}
