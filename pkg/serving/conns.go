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

package serving

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// connTracker keeps the accepted connections within a cap, in total and per client address.
// A connection over either cap displaces one that is not busy answering, of the address that
// holds the most: an idle keep-alive first, then the one that has waited longest for its
// handshake, its headers or its body. Only when every connection in its way is busy is the
// newcomer itself closed. So connections that idle or stall, however quickly they are
// reopened, cannot keep a client with a request ready out, unless they come from more
// addresses than the cap has connections.
type connTracker struct {
	maxConns, maxPerAddress int
	now                     func() time.Time

	mu        sync.Mutex
	conns     map[*trackedConn]struct{}
	byAddress map[string]int
}

func newConnTracker(maxConns, maxPerAddress int) *connTracker {
	return &connTracker{maxConns: maxConns, maxPerAddress: maxPerAddress, now: time.Now,
		conns: map[*trackedConn]struct{}{}, byAddress: map[string]int{}}
}

// trackedConn is an accepted connection and what it is doing.
type trackedConn struct {
	net.Conn
	tracker *connTracker
	address string
	once    sync.Once

	// Guarded by tracker.mu.
	idle  bool      // between requests (http.StateIdle)
	busy  int       // handlers answering on it, past reading their requests
	since time.Time // when idle or busy last changed
}

// admit registers conn, closing what it displaces; it returns nil, and closes conn, when
// every connection in its way is busy.
func (t *connTracker) admit(conn net.Conn) *trackedConn {
	tc := &trackedConn{Conn: conn, tracker: t, address: hostOf(conn.RemoteAddr().String())}
	var displaced []*trackedConn
	t.mu.Lock()
	now := t.now()
	tc.since = now
	if t.byAddress[tc.address] >= t.maxPerAddress {
		if v := t.victimLocked(tc.address); v != nil {
			t.removeLocked(v)
			displaced = append(displaced, v)
		} else {
			tc = nil
		}
	}
	if tc != nil && len(t.conns) >= t.maxConns {
		if v := t.victimLocked(""); v != nil {
			t.removeLocked(v)
			displaced = append(displaced, v)
		} else {
			tc = nil
		}
	}
	if tc != nil {
		t.conns[tc] = struct{}{}
		t.byAddress[tc.address]++
	}
	t.mu.Unlock()
	for _, v := range displaced {
		_ = v.Close()
	}
	if tc == nil {
		_ = conn.Close()
	}
	return tc
}

// victimLocked is the connection to close for a newcomer, among those of address (every one
// if address is ""), never a busy one: one of the address that holds the most connections,
// so that a client with few keeps them however many others open; of those, an idle one
// first, then the one that has waited longest.
func (t *connTracker) victimLocked(address string) *trackedConn {
	var best *trackedConn
	for c := range t.conns {
		if (address != "" && c.address != address) || c.busy > 0 {
			continue
		}
		if best == nil {
			best = c
			continue
		}
		mine, theirs := t.byAddress[c.address], t.byAddress[best.address]
		switch {
		case mine != theirs:
			if mine > theirs {
				best = c
			}
		case c.idle != best.idle:
			if c.idle {
				best = c
			}
		case c.since.Before(best.since):
			best = c
		}
	}
	return best
}

func (t *connTracker) removeLocked(c *trackedConn) {
	if _, ok := t.conns[c]; !ok {
		return
	}
	delete(t.conns, c)
	if t.byAddress[c.address]--; t.byAddress[c.address] <= 0 {
		delete(t.byAddress, c.address)
	}
}

// Close closes the connection and forgets it.
func (c *trackedConn) Close() error {
	var err error
	c.once.Do(func() {
		c.tracker.mu.Lock()
		c.tracker.removeLocked(c)
		c.tracker.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// setState follows the server's view of a connection: idle between requests, or not.
func (t *connTracker) setState(conn net.Conn, state http.ConnState) {
	c := unwrap(conn)
	if c == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch state {
	case http.StateHijacked, http.StateClosed:
		t.removeLocked(c)
	default:
		if idle := state == http.StateIdle; idle != c.idle {
			c.idle, c.since = idle, t.now()
		}
	}
}

// markBusy counts a handler answering on c until the returned function is called.
func (c *trackedConn) markBusy() func() {
	t := c.tracker
	t.mu.Lock()
	c.busy++
	c.since = t.now()
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			c.busy--
			c.since = t.now()
			t.mu.Unlock()
		})
	}
}

// unwrap returns the tracked connection under conn (a TLS connection's), or nil.
func unwrap(conn net.Conn) *trackedConn {
	if tlsConn, ok := conn.(*tls.Conn); ok {
		conn = tlsConn.NetConn()
	}
	c, _ := conn.(*trackedConn)
	return c
}

// hostOf is a remote address ("host:port") without its port: the unit of a client's share.
func hostOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// trackingListener hands out only connections the tracker admits.
type trackingListener struct {
	net.Listener
	tracker *connTracker
}

func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.tracker.admit(conn); tc != nil {
			return tc, nil
		}
	}
}

type connKey struct{}

// Busy marks the connection that ctx's request came on as answering until the returned
// function is called: from then on a newcomer does not displace it. A handler that reads a
// body calls it once the body is read, so that a client stalled mid-body stays displaceable.
// Outside a server of this package it does nothing.
func Busy(ctx context.Context) (done func()) {
	c, _ := ctx.Value(connKey{}).(*trackedConn)
	if c == nil {
		return func() {}
	}
	return c.markBusy()
}

// BusyWhileServing marks the connection busy for all of next's answer: for handlers that read
// no body, such as probes and metrics.
func BusyWhileServing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer Busy(r.Context())()
		next.ServeHTTP(w, r)
	})
}

// closeConnection closes the connection ctx's request came on, if it is tracked.
func closeConnection(ctx context.Context) {
	if c, _ := ctx.Value(connKey{}).(*trackedConn); c != nil {
		_ = c.Close()
	}
}
