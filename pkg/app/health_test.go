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
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// TestHealthServerCannotBeHeldOpen: the health server (and the metrics server, served the
// same way) disconnects a client that stalls mid-body after the read timeout and an idle
// keep-alive after the idle timeout, and refuses huge headers, where Go's defaults hold the
// first two forever and let headers take 1 MiB.
func TestHealthServerCannotBeHeldOpen(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	limits := defaultServeLimits()
	limits.idleTimeout = time.Second
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
		status, err := readUntilClosed(conn, start.Add(2*limits.readTimeout))
		lived := time.Since(start)
		t.Logf("a connection stalled mid-body lived %v (read timeout %v); answer %d", lived.Round(time.Millisecond), limits.readTimeout, status)
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
		_ = conn.SetReadDeadline(answered.Add(2 * limits.idleTimeout))
		_, err = io.Copy(io.Discard, r)
		t.Logf("an idle keep-alive connection lived %v (idle timeout %v)", time.Since(answered).Round(time.Millisecond), limits.idleTimeout)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the idle connection was still open after %v", 2*limits.idleTimeout)
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
