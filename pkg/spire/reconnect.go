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

	"google.golang.org/grpc/connectivity"
	"k8s.io/klog/v2"
)

// ReconnectWatcher is implemented by clients that can tell when their connection to SPIRE is
// up again after it was lost. Decorators implement it by passing it on (see WatchReconnects).
//
// A SPIRE server that restarted lost every connection it had, so a reconnection is when what
// it holds may no longer be what its clients remember writing: it may have come back on
// another datastore, or on a backup of the one it had.
type ReconnectWatcher interface {
	// WatchReconnects calls reconnected each time the connection to SPIRE is ready again
	// after it was lost, until ctx ends. Meanwhile it reconnects as soon as the connection is
	// lost, instead of at the next call, so that a server that came back is seen even when
	// nothing else calls it.
	WatchReconnects(ctx context.Context, reconnected func())
}

// WatchReconnects runs c's WatchReconnects until ctx ends and returns true when c is a
// ReconnectWatcher; otherwise it returns false at once.
func WatchReconnects(ctx context.Context, c any, reconnected func()) bool {
	w, ok := c.(ReconnectWatcher)
	if !ok {
		return false
	}
	w.WatchReconnects(ctx, reconnected)
	return true
}

// connectivityWatcher is what watching a connection needs of a *grpc.ClientConn.
type connectivityWatcher interface {
	GetState() connectivity.State
	WaitForStateChange(ctx context.Context, from connectivity.State) bool
	Connect()
}

// WatchReconnects follows the state of the client's gRPC connection. Over a connection made
// by Dial or DialTCP it always can; over a caller's connection given to New only when that
// is a *grpc.ClientConn, and otherwise it returns when ctx ends without calling reconnected.
func (c *Client) WatchReconnects(ctx context.Context, reconnected func()) {
	watchConnectivity(ctx, c.state, &c.reach, reconnected)
}

// WatchReconnects is Client.WatchReconnects for the authority client's connection. Its states
// tell no Reachability: the Client over the same connection has its own watchers.
func (c *AuthorityClient) WatchReconnects(ctx context.Context, reconnected func()) {
	watchConnectivity(ctx, c.state, nil, reconnected)
}

// watchConnectivity calls reconnected each time conn is READY again after it left READY, until
// ctx ends or conn is shut down. The first READY is no reconnection: the caller's first
// listing of SPIRE is what follows it.
//
// A connection leaves READY only when its transport ends: the server exited or restarted,
// closed the connection, or keepalive found the path dead. gRPC then leaves the channel IDLE
// until a call needs it, so the watcher asks it to connect again at once. WaitForStateChange
// returning after READY is proof that READY was left, even when the channel is READY again by
// the time its state is read: a reconnection as quick as that is still seen. What gRPC's API
// leaves unseen is a loss and a reconnection both between reading READY and waiting again,
// a few instructions: a new connection needs a handshake with a server that has started
// again, which takes far longer.
//
// A nil conn, one whose state cannot be read, is waited on until ctx ends. Each state read is
// told to reach, when not nil.
func watchConnectivity(ctx context.Context, conn connectivityWatcher, reach *Reachability, reconnected func()) {
	if conn == nil {
		<-ctx.Done()
		return
	}
	logger := klog.FromContext(ctx)
	lost := false
	state := conn.GetState()
	for {
		switch state {
		case connectivity.Shutdown:
			return
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, state) {
			return
		}
		if state == connectivity.Ready {
			lost = true
		}
		state = conn.GetState()
		if reach != nil {
			reach.connection(state)
		}
		if lost && state != connectivity.Ready {
			logger.V(4).Info("Connection to SPIRE not ready", "state", state)
		}
		if lost && state == connectivity.Ready {
			lost = false
			logger.Info("Connection to SPIRE is back after it was lost")
			reconnected()
		}
	}
}

// WatchReconnects passes the watch on to the inner client.
func (c *BatchingClient) WatchReconnects(ctx context.Context, reconnected func()) {
	if !WatchReconnects(ctx, c.inner, reconnected) {
		<-ctx.Done()
	}
}

// WatchReconnects passes the watch on: a dry run resyncs as a run does, and writes nothing.
func (d *dryRun) WatchReconnects(ctx context.Context, reconnected func()) {
	if !WatchReconnects(ctx, d.API, reconnected) {
		<-ctx.Done()
	}
}
