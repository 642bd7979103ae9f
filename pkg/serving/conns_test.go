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
	"net"
	"net/http"
	"testing"
	"time"
)

// fakeConn is a connection from a given address that records being closed.
type fakeConn struct {
	net.Conn
	remote net.Addr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

func fromAddress(ip string) *fakeConn {
	return &fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
}

// TestConnTrackerDisplaces: at the cap a newcomer displaces a connection of the address that
// holds the most, idle ones first, then the one waiting longest; never a busy one, and if
// all in its way are busy, the newcomer is closed. Over its address's share, a newcomer
// displaces only its own address's connections.
func TestConnTrackerDisplaces(t *testing.T) {
	clock := time.Unix(0, 0)
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	newTracker := func(maxConns, perAddress int) *connTracker {
		tr := newConnTracker(maxConns, perAddress)
		tr.now = tick
		return tr
	}
	admit := func(t *testing.T, tr *connTracker, ip string) (*fakeConn, *trackedConn) {
		t.Helper()
		raw := fromAddress(ip)
		return raw, tr.admit(raw)
	}

	t.Run("the crowded address gives way, idle first", func(t *testing.T) {
		tr := newTracker(4, 4)
		apiServer, _ := admit(t, tr, "10.0.0.1")
		waiting, _ := admit(t, tr, "10.0.0.2")
		idleRaw, idle := admit(t, tr, "10.0.0.2")
		tr.setState(idle, http.StateActive)
		tr.setState(idle, http.StateIdle)
		admit(t, tr, "10.0.0.2")
		newcomer, c := admit(t, tr, "10.0.0.3")
		if c == nil || newcomer.closed {
			t.Fatal("the newcomer was closed while idle connections could give way")
		}
		if !idleRaw.closed || waiting.closed || apiServer.closed {
			t.Errorf("closed: idle %v, waiting %v, the lone client %v; want only the idle one of the crowded address",
				idleRaw.closed, waiting.closed, apiServer.closed)
		}
		// Next, the longest waiting of the crowded address, never the lone client's.
		admit(t, tr, "10.0.0.4")
		if !waiting.closed || apiServer.closed {
			t.Errorf("closed: longest waiting %v, the lone client %v; want the longest waiting of the crowded address", waiting.closed, apiServer.closed)
		}
	})

	t.Run("busy connections are kept", func(t *testing.T) {
		tr := newTracker(2, 2)
		raws := make([]*fakeConn, 2)
		for i := range raws {
			var c *trackedConn
			raws[i], c = admit(t, tr, "10.0.0.2")
			defer c.markBusy()()
		}
		newcomer, c := admit(t, tr, "10.0.0.3")
		if c != nil || !newcomer.closed {
			t.Error("with every connection busy, the newcomer was admitted")
		}
		for i, raw := range raws {
			if raw.closed {
				t.Errorf("busy connection %d was closed", i)
			}
		}
	})

	t.Run("an address over its share displaces its own", func(t *testing.T) {
		tr := newTracker(8, 2)
		other, _ := admit(t, tr, "10.0.0.1")
		first, _ := admit(t, tr, "10.0.0.2")
		second, _ := admit(t, tr, "10.0.0.2")
		third, c := admit(t, tr, "10.0.0.2")
		if c == nil || third.closed {
			t.Fatal("the newcomer was closed while its address's waiting connections could give way")
		}
		if !first.closed || second.closed || other.closed {
			t.Errorf("closed: first %v, second %v, another address's %v; want its own longest waiting",
				first.closed, second.closed, other.closed)
		}
	})

	t.Run("a closed connection frees its place", func(t *testing.T) {
		tr := newTracker(1, 1)
		_, c := admit(t, tr, "10.0.0.1")
		done := c.markBusy()
		_ = c.Close()
		done()
		if _, c := admit(t, tr, "10.0.0.1"); c == nil {
			t.Error("a closed connection still counted against the cap")
		}
	})
}
