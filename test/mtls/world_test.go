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

package mtls

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	trustDomain = realcluster.DefaultTrustDomain
	// registrarID is the SPIFFE ID of spire-registrar's admin entry.
	registrarID = "spiffe://" + trustDomain + "/spire-registrar"
	// registrarSVIDTTL is the admin entry's X509-SVID lifetime: short, so that the agent
	// rotates it (at about half of it) while the test runs.
	registrarSVIDTTL = 30 * time.Second
)

// world is a kube-apiserver, a spire-server, a spire-agent attested to it with a join token,
// and the spire-registrar binary reaching the server's TCP API through a proxy the test can
// cut, with an admin X509-SVID from the agent.
type world struct {
	stack *realcluster.Stack
	agent *realcluster.Agent
	proxy *tcpProxy
	// testExe is this test binary, which the agent tells apart from spire-registrar by its
	// unix:path selector.
	testExe string
	uid     string

	registrar *registrar
}

func newWorld(t *testing.T) *world {
	t.Helper()
	bin := buildRegistrar(t)
	stack := realcluster.NewStack(t)
	agent := realcluster.NewAgent(t, realcluster.AgentOptions{Server: stack.SPIRE, DiscoverWorkloadPath: true})
	testExe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if testExe, err = filepath.EvalSymlinks(testExe); err != nil {
		t.Fatal(err)
	}
	w := &world{stack: stack, agent: agent, proxy: newTCPProxy(t, stack.SPIRE.Address()), testExe: testExe, uid: strconv.Itoa(os.Getuid())}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The controller's admin entry: its uid and its executable, parented to the agent.
	if _, err := agent.CreateWorkloadEntryCLI(ctx, registrarID, []string{"unix:uid:" + w.uid, "unix:path:" + bin},
		"-admin", "-x509SVIDTTL", strconv.Itoa(int(registrarSVIDTTL/time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := agent.WaitForSVIDCached(ctx, registrarID); err != nil {
		t.Fatal(err)
	}
	// No entryIDPrefix: every undeclared entry is spire-registrar's, yet the first full resync
	// must keep its own admin entry, or SPIRE refuses it from then on. The long gcInterval
	// makes that first resync the only one, so the undeclared entries the steps create by
	// the CLI stay while they are used.
	config := fmt.Sprintf("apiVersion: spire.spiffe.io/v1alpha1\nkind: ControllerManagerConfig\ntrustDomain: %s\nclusterName: it\nclusterDomain: cluster.local\n"+
		"gcInterval: 1h\nspireServerAddress: %s\nworkloadAPISocketPath: %s\n", trustDomain, w.proxy.Addr(), agent.SocketPath())
	w.registrar = startRegistrar(t, bin, stack.Kube.Kubeconfig(), config)
	return w
}

// buildRegistrar builds the spire-registrar binary as a user runs it.
func buildRegistrar(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "spire-registrar")
	out, err := exec.Command("go", "build", "-o", bin, realcluster.ModulePath+"/cmd/spire-registrar").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin, err = filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// registrar is a running spire-registrar binary.
type registrar struct {
	cmd     *exec.Cmd
	logs    *syncBuffer
	started time.Time
	// health is the address of /readyz.
	health string
}

func startRegistrar(t *testing.T, bin, kubeconfig, config string) *registrar {
	t.Helper()
	dir := t.TempDir()
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &registrar{logs: &syncBuffer{}, health: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	r.cmd = exec.Command(bin, "--kubeconfig", kubeconfig, "--config", configPath, "--health-probe-bind-address", r.health, "-v=2")
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r.started = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = r.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("spire-registrar output:\n%s", r.logs.String())
		}
	})
	return r
}

// ready reports whether /readyz answers 200: every controller listed SPIRE once.
func (r *registrar) ready() bool {
	resp, err := http.Get("http://" + r.health + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// logMatches returns the submatches of re in the log lines so far, in order.
func (r *registrar) logMatches(re *regexp.Regexp) [][]string {
	return re.FindAllStringSubmatch(r.logs.String(), -1)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitForEntry waits until SPIRE, read through its own CLI, holds (want) or no longer holds
// (!want) an entry with the SPIFFE ID, and returns how long that took from since.
func waitForEntry(ctx context.Context, t *testing.T, spire *realcluster.SPIRE, spiffeID string, want bool, since time.Time) time.Duration {
	t.Helper()
	var took time.Duration
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := spire.EntryShow(ctx)
		if err != nil {
			return false, nil
		}
		has := slices.ContainsFunc(entries, func(e realcluster.Entry) bool { return e.SPIFFEID == spiffeID })
		took = time.Since(since)
		return has == want, nil
	})
	if err != nil {
		t.Fatalf("SPIRE entry %s present=%v: not within a minute: %v", spiffeID, want, err)
	}
	return took
}
