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

package spire

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// fakeConn is a connection whose state the test sets, with WaitForStateChange's semantics: it
// returns at once when the state is not the one given, else at the next change.
type fakeConn struct {
	mu       sync.Mutex
	state    connectivity.State
	changed  chan struct{} // closed at each change, then replaced
	connects int
	waiting  chan struct{} // receives a value each time the watcher starts waiting
}

func newFakeConn() *fakeConn {
	return &fakeConn{state: connectivity.Idle, changed: make(chan struct{}), waiting: make(chan struct{}, 100)}
}

func (f *fakeConn) GetState() connectivity.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeConn) WaitForStateChange(ctx context.Context, from connectivity.State) bool {
	f.mu.Lock()
	ch, now := f.changed, f.state
	f.mu.Unlock()
	if now != from {
		return true
	}
	f.waiting <- struct{}{}
	select {
	case <-ctx.Done():
		return false
	case <-ch:
		return true
	}
}

func (f *fakeConn) Connect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects++
}

// set moves the connection through states, the last one staying, with one notification
// however many there are: a watcher that was waiting reads only the last.
func (f *fakeConn) set(states ...connectivity.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = states[len(states)-1]
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeConn) connectCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connects
}

// TestWatchConnectivity walks a connection through a first connection, a loss, a failed
// reconnection and a quick one, checking when the watcher reports a reconnection and when it
// asks the connection to reconnect.
func TestWatchConnectivity(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn := newFakeConn()
	var reconnections atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchConnectivity(ctx, conn, nil, func() { reconnections.Add(1) })
	}()
	// step sets states and waits until the watcher has read them and waits again.
	step := func(states ...connectivity.State) {
		t.Helper()
		conn.set(states...)
		select {
		case <-conn.waiting:
		case <-time.After(5 * time.Second):
			t.Fatalf("the watcher did not wait again after %v", states)
		}
	}
	expect := func(what string, wantReconnections, wantConnects int) {
		t.Helper()
		if got := int(reconnections.Load()); got != wantReconnections {
			t.Errorf("%s: %d reconnections reported, want %d", what, got, wantReconnections)
		}
		if got := conn.connectCalls(); got != wantConnects {
			t.Errorf("%s: Connect called %d times, want %d", what, got, wantConnects)
		}
	}

	<-conn.waiting
	expect("idle at start: connect", 0, 1)
	step(connectivity.Connecting)
	step(connectivity.TransientFailure) // SPIRE not up yet
	step(connectivity.Connecting)
	step(connectivity.Ready)
	expect("the first connection is no reconnection", 0, 1)

	step(connectivity.Idle) // the server went away: gRPC waits for a call, the watcher does not
	expect("lost", 0, 2)
	step(connectivity.Connecting)
	step(connectivity.TransientFailure)
	step(connectivity.Connecting)
	expect("still away", 0, 2)
	step(connectivity.Ready)
	expect("back", 1, 2)

	// Lost and back before the watcher reads the state: still a reconnection.
	step(connectivity.Idle, connectivity.Connecting, connectivity.Ready)
	expect("lost and back at once", 2, 2)

	conn.set(connectivity.Shutdown)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher did not return once the connection was shut down")
	}
}

// TestWatchReconnectsSeesARestartedServer runs the watch on a real gRPC connection over a
// unix socket, as to SPIRE's admin socket: a server that stops and starts again is reported
// once it is back, without any call made meanwhile, and not at the first connection.
func TestWatchReconnectsSeesARestartedServer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	server := spiretest.New(t)
	c, err := Dial(ctx, server.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	reconnected := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !WatchReconnects(ctx, c, func() { reconnected <- struct{}{} }) {
			t.Error("a client made by Dial cannot watch its connection")
		}
	}()
	waitState := func(want connectivity.State) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for c.state.GetState() != want {
			if time.Now().After(deadline) {
				t.Fatalf("connection %v, want %v", c.state.GetState(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The watcher connects by itself.
	waitState(connectivity.Ready)
	select {
	case <-reconnected:
		t.Fatal("the first connection was reported as a reconnection")
	case <-time.After(200 * time.Millisecond):
	}

	if since, err := c.Reachability().Unreachable(); !since.IsZero() {
		t.Errorf("SPIRE unreachable since %v (%v) with the connection ready", since, err)
	}

	server.Stop()
	time.Sleep(500 * time.Millisecond) // a few failed reconnections
	if s := c.state.GetState(); s == connectivity.Ready {
		t.Fatalf("connection %v with the server stopped", s)
	}
	// Known without a call: the watch saw the reconnections fail.
	if since, err := c.Reachability().Unreachable(); since.IsZero() {
		t.Error("SPIRE reachable, as the client knows it, with the server stopped")
	} else {
		t.Logf("SPIRE unreachable since %v: %v", time.Since(since), err)
	}
	calls := server.Calls(spiretest.MethodListEntries)
	start := time.Now()
	server.Start()
	select {
	case <-reconnected:
		t.Logf("reconnection reported %v after the server was back", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("no reconnection reported within 10s of the server's return")
	}
	if got := server.Calls(spiretest.MethodListEntries); got != calls {
		t.Errorf("%d calls made to see the server back, want none", got-calls)
	}
	if since, err := c.Reachability().Unreachable(); !since.IsZero() {
		t.Errorf("SPIRE unreachable since %v (%v) after the reconnection", since, err)
	}

	cancel()
	<-done
}

// TestDecoratorsPassTheWatchOn: the dry run and batching clients watch through to the
// client they wrap, and a client that cannot watch says so.
func TestDecoratorsPassTheWatchOn(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	conn := newFakeConn()
	inner := New(nil)
	inner.state = conn
	for name, c := range map[string]API{
		"dry run":  DryRun(inner, nil),
		"batching": NewBatchedAPI(inner, BatchingOptions{}),
	} {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan bool)
		go func() { done <- WatchReconnects(ctx, c, func() {}) }()
		select {
		case <-conn.waiting:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the inner connection is not watched", name)
		}
		cancel()
		if !<-done {
			t.Errorf("%s: WatchReconnects reports the client cannot watch", name)
		}
	}
	if WatchReconnects(ctx, struct{ API }{}, func() {}) {
		t.Error("WatchReconnects reports a watch on a client without one")
	}
}

// Both clients of the SPIRE connection report its reconnections: the entry and federation
// controllers watch Client, the pod certificate signer AuthorityClient.
var (
	_ ReconnectWatcher = (*Client)(nil)
	_ ReconnectWatcher = (*AuthorityClient)(nil)
)
