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
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// replica is one spire-registrar process with its metrics and health endpoints.
type replica struct {
	cmd  *exec.Cmd
	logs *realcluster.SyncBuffer
	// exited receives the process's exit once; done is closed then.
	exited  chan error
	done    chan struct{}
	metrics string
	health  string
}

// startReplica runs the binary bin with config against the cluster of kubeconfig, serving
// metrics and health on free ports. The test's end kills it, and shows its output if the test
// failed.
func startReplica(t *testing.T, bin, kubeconfig, config string) *replica {
	t.Helper()
	r := &replica{logs: &realcluster.SyncBuffer{}, exited: make(chan error, 1), done: make(chan struct{})}
	mp, hp := freePort(t), freePort(t)
	r.metrics, r.health = fmt.Sprintf("http://127.0.0.1:%d", mp), fmt.Sprintf("http://127.0.0.1:%d", hp)
	r.cmd = exec.Command(bin, "--kubeconfig", kubeconfig, "--config", config,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", mp), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", hp))
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := r.cmd.Wait()
		close(r.done)
		r.exited <- err
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), r.logs.String())
		}
	})
	return r
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// resyncs is how many full resyncs the replica ran: only a leader runs any.
func (r *replica) resyncs() int {
	_, body := get(r.metrics + "/metrics")
	n := 0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "spire_registrar_full_resyncs_total{") && strings.Contains(line, "success") {
			_, _ = fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%d", &n)
		}
	}
	return n
}

// TestLeaderElection runs two replicas against one apiserver and SPIRE server: exactly one
// writes; when it is SIGKILLed the other takes over within the lease time and makes no
// duplicate entries. It also scrapes /metrics and probes /healthz and /readyz.
func TestLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStack(t)
	kube, spire, client, spireAPI := stack.Kube, stack.SPIRE, stack.Client, stack.SpireAPI
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreatePod(ctx, client, "default", "first", node.Name); err != nil {
		t.Fatal(err)
	}

	const leaseDuration = 4 * time.Second
	config := writeFile(t, fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: it
spireServerSocketPath: %s
leaderElection:
  leaderElect: true
  resourceName: spire-registrar-it
  resourceNamespace: default
  leaseDuration: %s
  renewDeadline: 3s
  retryPeriod: 500ms
`, spire.SocketPath(), leaseDuration))
	start := func() *replica { return startReplica(t, bin, kube.Kubeconfig(), config) }
	a, b := start(), start()

	poll := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	entries := func() []realcluster.Entry {
		es, err := spire.EntryShow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	poll("the first entry", time.Minute, func() bool { return len(entries()) == 1 })
	for _, r := range []*replica{a, b} {
		poll("both replicas ready (leader synced, standby waiting)", 30*time.Second, func() bool {
			code, _ := get(r.health + "/readyz")
			return code == http.StatusOK
		})
		if code, body := get(r.health + "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz = %d %s", code, body)
		}
	}

	var leader, standby *replica
	poll("one leader", 10*time.Second, func() bool { return a.resyncs() > 0 || b.resyncs() > 0 })
	if a.resyncs() > 0 {
		leader, standby = a, b
	} else {
		leader, standby = b, a
	}
	if standby.resyncs() != 0 {
		t.Fatalf("both replicas ran resyncs: two writers")
	}
	// The first entry came from the leader's initial full resync; a series appears with the
	// first sync of its kind (the ClusterSPIFFEID's status, after its delay), so wait for them.
	var missing []string
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		_, body := get(leader.metrics + "/metrics")
		missing = nil
		for _, metric := range []string{
			"spire_registrar_workqueue_adds_total", "spire_registrar_sync_duration_seconds_bucket",
			"spire_registrar_spire_requests_total{code=\"OK\",method=\"ListEntries\"}",
			"spire_registrar_spire_items_total{method=\"BatchCreateEntry\",result=\"success\"}",
			"spire_registrar_last_full_resync_timestamp_seconds", "process_resident_memory_bytes",
		} {
			if !strings.Contains(body, metric) {
				missing = append(missing, metric)
			}
		}
		return len(missing) == 0, nil
	})
	for _, metric := range missing {
		t.Errorf("/metrics lacks %s", metric)
	}

	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if _, err := realcluster.CreatePod(ctx, client, "default", "second", node.Name); err != nil {
		t.Fatal(err)
	}
	poll("the standby to take over and register the new pod", 3*leaseDuration+10*time.Second, func() bool { return len(entries()) == 2 })
	t.Logf("takeover: new pod registered %v after the leader was killed (lease %v)", time.Since(killed), leaseDuration)
	seen := map[string]bool{}
	for _, e := range entries() {
		if seen[e.SPIFFEID] {
			t.Errorf("duplicate entry for %s", e.SPIFFEID)
		}
		seen[e.SPIFFEID] = true
	}
	if standby.resyncs() == 0 {
		t.Errorf("the new leader ran no resync")
	}
}
