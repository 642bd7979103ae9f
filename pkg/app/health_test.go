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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// TestHealthServerCannotBeHeldOpen: the health server (and the metrics server, served the
// same way) disconnects a client that stalls mid-body after the read timeout and an idle
// keep-alive after the idle timeout, and refuses huge headers, where Go's defaults hold the
// first two forever and let headers take 1 MiB.
func TestHealthServerCannotBeHeldOpen(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	limits := defaultServeLimits()
	limits.IdleTimeout = time.Second
	addr, err := serve(ctx, "health", "127.0.0.1:0", (&Health{}).Handler("healthz", "readyz"), limits)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(t *testing.T) net.Conn {
		conn, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}

	t.Run("stalled body", func(t *testing.T) {
		conn := dial(t)
		start := time.Now()
		if _, err := fmt.Fprint(conn, "POST /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nhalf"); err != nil {
			t.Fatal(err)
		}
		status, err := readUntilClosed(conn, start.Add(2*limits.ReadTimeout))
		lived := time.Since(start)
		t.Logf("a connection stalled mid-body lived %v (read timeout %v); answer %d", lived.Round(time.Millisecond), limits.ReadTimeout, status)
		if err != nil {
			t.Fatalf("the stalled connection was still open after %v: %v", lived.Round(time.Millisecond), err)
		}
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		conn := dial(t)
		if _, err := fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		answered := time.Now()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("liveness answered %d", resp.StatusCode)
		}
		_ = conn.SetReadDeadline(answered.Add(2 * limits.IdleTimeout))
		_, err = io.Copy(io.Discard, r)
		t.Logf("an idle keep-alive connection lived %v (idle timeout %v)", time.Since(answered).Round(time.Millisecond), limits.IdleTimeout)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the idle connection was still open after %v", 2*limits.IdleTimeout)
		}
	})

	t.Run("huge headers", func(t *testing.T) {
		conn := dial(t)
		if _, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: %s\r\n\r\n", strings.Repeat("a", 256<<10)); err != nil {
			t.Fatal(err)
		}
		status, err := readUntilClosed(conn, time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		if status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("answer %d to 256 KiB of headers, want 431", status)
		}
	})
}

// TestHealthServerBoundsConnections: the health and metrics servers take at most MaxConns
// connections, however many are opened (each beyond displaces one that does nothing, of the
// address holding the most), so that idle connections from other addresses cost bounded
// goroutines and a probe is still answered; Go's default server takes every one.
func TestHealthServerBoundsConnections(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	limits := defaultServeLimits()
	addr, err := serve(ctx, "health", "127.0.0.1:0", (&Health{}).Handler("healthz", "readyz"), limits)
	if err != nil {
		t.Fatal(err)
	}
	const idle = 256
	before := runtime.NumGoroutine()
	for i := range idle {
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%4))}}
		conn, err := dialer.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
	}
	// A server without the cap takes every connection within milliseconds; give it a second
	// to show it does (the goroutine count is the only view into its accept loop).
	var grown int
	_ = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
		grown = runtime.NumGoroutine() - before
		return grown >= idle, nil
	})
	t.Logf("%d idle connections: goroutines grew by %d (MaxConns %d)", idle, grown, limits.MaxConns)
	if bound := limits.MaxConns + 8; grown > bound {
		t.Errorf("goroutines grew by %d with %d idle connections, want at most %d", grown, idle, bound)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr.String() + "/healthz")
	if err != nil {
		t.Fatalf("with %d idle connections open, a probe was not answered: %v", idle, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("liveness answered %d", resp.StatusCode)
	}
}

// readUntilClosed reads the connection until the server closes it, or fails at deadline.
// It returns the status of the answer, if one came before the close.
func readUntilClosed(conn net.Conn, deadline time.Time) (int, error) {
	if err := conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	status := 0
	if resp, err := http.ReadResponse(r, nil); err == nil {
		status = resp.StatusCode
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, r); errors.Is(err, os.ErrDeadlineExceeded) {
		return status, fmt.Errorf("answered %d but not closed: %w", status, err)
	}
	return status, nil
}

// waitingController is a Controller whose keys wait for SPIRE as the test says.
type waitingController struct {
	name    string
	synced  atomic.Bool
	waiting atomic.Int32
}

func (c *waitingController) Name() string             { return c.name }
func (c *waitingController) Run(context.Context, int) {}
func (c *waitingController) HasSynced() bool          { return c.synced.Load() }
func (c *waitingController) Waiting() int             { return int(c.waiting.Load()) }

// TestReadinessSaysWhatWaitsForSPIRE: /readyz says since when SPIRE has not answered the
// client and how many keys of which controllers wait for it, before the first sync (503) and
// after it, when SPIRE unreachable does not make the process unready (200); with SPIRE
// answering and nothing waiting, it says "ok" and nothing more.
func TestReadinessSaysWhatWaitsForSPIRE(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	server := spiretest.New(t)
	client, err := spire.Dial(ctx, server.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	entry, federation := &waitingController{name: "entry"}, &waitingController{name: "federation"}
	h := &Health{}
	h.spire.Store(client.Reachability())
	h.setControllers([]Controller{entry, federation})
	web := httptest.NewServer(h.Handler("healthz", "readyz"))
	defer web.Close()
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(web.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	expect := func(what string, wantCode int, wantBody *regexp.Regexp) {
		t.Helper()
		if code, body := readyz(); code != wantCode || !wantBody.MatchString(body) {
			t.Errorf("%s: /readyz answers %d %q, want %d and a body matching %q", what, code, body, wantCode, wantBody)
		}
	}

	server.Stop()
	if err := client.Probe(ctx); err == nil {
		t.Fatal("a probe of a stopped server succeeded")
	}
	expect("SPIRE down at start", http.StatusServiceUnavailable,
		regexp.MustCompile(`^entry has not completed its first sync: [^\n]+\nSPIRE unreachable for \d+s: rpc error: code = Unavailable desc = .+\n$`))

	server.Start()
	answered(ctx, t, client)
	entry.synced.Store(true)
	federation.synced.Store(true)
	expect("synced", http.StatusOK, regexp.MustCompile(`^ok$`))

	server.Stop()
	if err := client.Probe(ctx); err == nil {
		t.Fatal("a probe of a stopped server succeeded")
	}
	entry.waiting.Store(30)
	federation.waiting.Store(1)
	expect("SPIRE down with keys waiting", http.StatusOK,
		regexp.MustCompile(`^ok\nSPIRE unreachable for \d+s: rpc error: code = Unavailable desc = .+\n31 keys waiting for SPIRE to answer: entry 30, federation 1$`))

	server.Start()
	answered(ctx, t, client)
	expect("SPIRE back, keys not yet queued again", http.StatusOK, regexp.MustCompile(`^ok\n31 keys waiting for SPIRE to answer: entry 30, federation 1$`))
	entry.waiting.Store(0)
	federation.waiting.Store(0)
	expect("SPIRE back, nothing waiting", http.StatusOK, regexp.MustCompile(`^ok$`))
}

// answered probes SPIRE through client until it answers: a client whose server came back
// reconnects within its backoff.
func answered(ctx context.Context, t *testing.T, client *spire.Client) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return client.Probe(ctx) == nil, nil
	}); err != nil {
		t.Fatalf("SPIRE did not answer within 10s of its start: %v", err)
	}
}
