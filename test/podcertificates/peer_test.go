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

package podcertificates

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The mTLS peer is this test binary, copied to a path of its own so that the agent tells it
// apart by its unix:path selector, and started with these environment variables: TestMain
// then runs it instead of the tests.
const (
	// peerEnv holds the Workload API address the peer gets its X509-SVID and bundle from.
	peerEnv = "PODCERTIFICATES_PEER_WORKLOAD_API"
	// peerAuthorizeEnv holds the one SPIFFE ID the peer accepts as a client.
	peerAuthorizeEnv = "PODCERTIFICATES_PEER_AUTHORIZE"
)

// runPeer is the peer process: an mTLS server on 127.0.0.1 with the X509-SVID the agent gives
// it, accepting only clients with the SPIFFE ID peerAuthorizeEnv names, verified against the
// bundle the agent gives it. It prints "listening <address> as <its SPIFFE ID>", then per
// connection "served <client ID>" or "refused: <why>", and answers each client's line with a
// greeting that names both IDs. It runs until killed.
func runPeer() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 1
	}
	allowed, err := spiffeid.FromString(os.Getenv(peerAuthorizeEnv))
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	source, err := workloadapi.NewX509Source(ctx, workloadapi.WithClientOptions(workloadapi.WithAddr(os.Getenv(peerEnv))))
	cancel()
	if err != nil {
		return fail(err)
	}
	defer source.Close()
	svid, err := source.GetX509SVID()
	if err != nil {
		return fail(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsconfig.MTLSServerConfig(source, source, tlsconfig.AuthorizeID(allowed)))
	if err != nil {
		return fail(err)
	}
	fmt.Printf("listening %s as %s\n", ln.Addr(), svid.ID)
	for {
		conn, err := ln.Accept()
		if err != nil {
			return fail(err)
		}
		go servePeer(conn.(*tls.Conn), svid.ID)
	}
}

// servePeer completes the handshake and answers one line.
func servePeer(conn *tls.Conn, self spiffeid.ID) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := conn.Handshake(); err != nil {
		fmt.Printf("refused: %v\n", err)
		return
	}
	client, err := x509svid.IDFromCert(conn.ConnectionState().PeerCertificates[0])
	if err != nil {
		fmt.Printf("refused: %v\n", err)
		return
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		fmt.Printf("read from %s: %v\n", client, err)
		return
	}
	fmt.Fprintf(conn, "hello %s, this is %s; you said %q\n", client, self, strings.TrimSpace(line))
	fmt.Printf("served %s\n", client)
}

// peer is a running peer process.
type peer struct {
	addr string
	id   string
	mu   sync.Mutex
	out  []string // the lines it printed after "listening"
}

// startPeer copies this test binary to a path of its own, which an entry for id selects with
// the test's uid, has the agent sync that entry, and starts the copy as the peer, accepting
// client. It is killed when the test ends.
func (w *world) startPeer(t *testing.T, id, client string) *peer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mtls-peer")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if path, err = filepath.EvalSymlinks(path); err != nil {
		t.Fatal(err)
	}
	if _, err := w.agent.CreateWorkloadEntryCLI(t.Context(), id, []string{"unix:uid:" + w.uid, "unix:path:" + path}); err != nil {
		t.Fatal(err)
	}
	if err := w.agent.WaitForSVIDCached(t.Context(), id); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), peerEnv+"="+w.agent.WorkloadAPIAddress(), peerAuthorizeEnv+"="+client)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan string, 1)
	p := &peer{id: id}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "listening ") {
				listening <- line
			} else {
				p.mu.Lock()
				p.out = append(p.out, line)
				p.mu.Unlock()
			}
		}
	}()
	select {
	case line := <-listening:
		var as string
		if _, err := fmt.Sscanf(line, "listening %s as %s", &p.addr, &as); err != nil {
			t.Fatalf("peer printed %q: %v", line, err)
		}
		if as != id {
			t.Fatalf("the peer got the X509-SVID of %s, want %s", as, id)
		}
	case <-time.After(time.Minute):
		t.Fatal("the peer did not listen within a minute")
	}
	return p
}

// waitSaid waits until the peer printed a line with prefix, and returns it.
func (p *peer) waitSaid(t *testing.T, prefix string) string {
	t.Helper()
	var said string
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, line := range p.out {
			if strings.HasPrefix(line, prefix) {
				said = line
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Fatalf("the peer did not print %q within 10s; it printed %q", prefix, p.out)
	}
	return said
}

// dialPeer connects to addr over mTLS with cfg, sends a line and returns the answer, or the
// error of the handshake or of the exchange. With TLS 1.3 the client's handshake may end
// before the server has checked the client's certificate: a refusal then shows on the read.
func dialPeer(addr string, cfg *tls.Config, line string) (string, *tls.ConnectionState, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintln(conn, line); err != nil {
		return "", nil, err
	}
	answer, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	state := conn.ConnectionState()
	return strings.TrimSpace(answer), &state, nil
}
