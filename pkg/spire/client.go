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

// Package spire is a client for the SPIRE server's admin API (entry and
// trust domain services) reached over the server's local unix socket. It
// pages lists to completion, splits writes into bounded batches and reports
// one result per input item, so controllers can reconcile item by item.
package spire

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	trustdomainv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/trustdomain/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

const (
	// DefaultPageSize is the page size used for list calls. SPIRE has no
	// upper bound of its own; 1000 entries stay far below the 4 MiB default
	// gRPC message limit while keeping round trips few on large servers.
	DefaultPageSize = 1000

	// DefaultBatchSize bounds the items sent in one Batch* call. SPIRE (as of
	// v1.13) sets no per-batch limit, but the server rejects requests larger
	// than gRPC's default 4 MiB receive size and handles a batch in a single
	// datastore pass per item; 500 keeps requests around a few hundred KiB
	// and matches the page size SPIRE's own CLI uses.
	DefaultBatchSize = 500

	// maxRecvMsgSize raises the client's receive limit above gRPC's 4 MiB
	// default so a full page of large entries (many DNS names or selectors)
	// cannot fail a whole listing.
	maxRecvMsgSize = 32 << 20

	// DefaultCallTimeout bounds every unary call the client makes, unless the caller's
	// context ends sooner. The slowest call SPIRE serves is a batch of 500 writes, which
	// takes seconds at most on PostgreSQL; a list page of 1000 entries is sub-second. 30 s is
	// generous for both, yet keeps a call on a connection that silently lost its path, and
	// any lock its caller holds, from waiting for ever.
	DefaultCallTimeout = 30 * time.Second

	// keepaliveTime is how long the client goes without reading anything, while calls are
	// in flight, before it pings the server (and it pings as the first call after such a
	// quiet spell starts); keepaliveTimeout is how long it then waits for any frame before
	// it closes the connection, and the TCP_USER_TIMEOUT gRPC sets. So a dead path is found
	// within 25 s, sooner than DefaultCallTimeout, and the next call dials a new connection
	// instead of timing out on the dead one.
	//
	// SPIRE's servers (1.15.3, admin socket and TCP) keep gRPC's default keepalive
	// enforcement: a ping less than 5 minutes after the previous one with no data sent by
	// the server in between is a strike, so is a ping with no call in flight, and the third
	// strike closes the connection with GOAWAY "too_many_pings". The client therefore never
	// pings without a call in flight (PermitWithoutStream false), and every answer clears
	// the strikes: only a server that answers nothing for four pings in a row (60 s with
	// calls waiting) hangs up, and a new connection is then the right thing to try.
	keepaliveTime    = 15 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// Client talks to one SPIRE server's admin API. Its methods are safe for
// concurrent use; PageSize and BatchSize must be set before first use.
type Client struct {
	// PageSize is the page size requested from list calls; values <= 0 mean
	// DefaultPageSize.
	PageSize int
	// Identity is the SPIFFE ID the client presents to the server over TCP with mTLS, and ""
	// over the admin socket. The entry that issues it must never be deleted by the client's
	// own reconcilers: SPIRE would refuse every call after that.
	Identity string
	// BatchSize is the largest number of items sent in one Batch* call;
	// values <= 0 mean DefaultBatchSize.
	BatchSize int

	conn *grpc.ClientConn // nil when built by New over a caller's connection
	// release, if set, frees what the connection's credentials hold (e.g. the X509Source of
	// DialTCP); Close calls it after closing conn.
	release func() error
	// cc is the caller's connection with each call bounded by its deadline.
	cc *boundedConn
	// reach is what the calls on cc and the connection's states say of SPIRE's reachability.
	reach Reachability
	// state is the connection's state, which WatchReconnects follows; nil when New was given
	// a connection that does not tell it.
	state   connectivityWatcher
	entries entryv1.EntryClient
	tds     trustdomainv1.TrustDomainClient

	// readyDelay and readyMaxDelay shape WaitReady's polling; tests shorten
	// them.
	readyDelay    time.Duration
	readyMaxDelay time.Duration
	// probeTimeout bounds one readiness probe so a stuck connection attempt
	// cannot hold WaitReady past its next poll.
	probeTimeout time.Duration
}

// Dial returns a client for the SPIRE server admin socket at socketPath.
// It does not connect: the socket may not exist yet (SPIRE still starting),
// in which case calls fail with codes.Unavailable until it appears. Use
// WaitReady to block until the server answers. opts are appended to the
// client's defaults. ctx is used only for logging.
func Dial(ctx context.Context, socketPath string, opts ...grpc.DialOption) (*Client, error) {
	if socketPath == "" {
		return nil, errors.New("spire server socket path is empty")
	}
	// The unix resolver needs an absolute path after "unix://"; a relative
	// one would be read as an authority.
	abs, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, fmt.Errorf("resolve spire server socket path %q: %w", socketPath, err)
	}
	// The admin socket is local; access is controlled by file permissions,
	// not TLS.
	c, err := dial("unix://"+abs, insecure.NewCredentials(), opts)
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Created SPIRE server client", "socket", abs)
	return c, nil
}

// dial creates a client for target with the client's default options, then opts.
func dial(target string, creds credentials.TransportCredentials, opts []grpc.DialOption) (*Client, error) {
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// gRPC's default reconnect backoff grows to 2 minutes, which would
		// leave the controller idle long after SPIRE comes up. Changes made
		// during an outage wait for the reconnection, so it is tried every
		// second at most: a refused connect costs neither side anything.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  250 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   time.Second,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                keepaliveTime,
			Timeout:             keepaliveTimeout,
			PermitWithoutStream: false,
		}),
		// gRPC closes a channel's connection after 30 minutes without calls by default. The
		// connection to SPIRE is meant to stay up: WatchReconnects reads its loss as a sign
		// that SPIRE may have restarted, and a resync after every quiet half hour would be a
		// full listing for nothing.
		grpc.WithIdleTimeout(0),
	}
	conn, err := grpc.NewClient(target, append(dialOpts, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("create spire server client for %q: %w", target, err)
	}
	c := New(conn)
	c.conn = conn
	return c, nil
}

// New returns a client over an existing connection, which the caller keeps
// owning: Close does not close it. Each unary call the client makes on it gets a
// deadline of DefaultCallTimeout unless the caller's context ends sooner.
func New(cc grpc.ClientConnInterface) *Client {
	state, _ := cc.(connectivityWatcher)
	c := &Client{
		state:         state,
		readyDelay:    200 * time.Millisecond,
		readyMaxDelay: 5 * time.Second,
		probeTimeout:  10 * time.Second,
	}
	c.cc = &boundedConn{cc: cc, timeout: DefaultCallTimeout, reach: &c.reach}
	c.entries = entryv1.NewEntryClient(c.cc)
	c.tds = trustdomainv1.NewTrustDomainClient(c.cc)
	return c
}

// Reachability is what the client knows of whether SPIRE answers.
func (c *Client) Reachability() *Reachability { return &c.reach }

// Close releases the connection made by Dial or DialTCP, and what its credentials hold.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	var errs []error
	if err := c.conn.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close spire server connection: %w", err))
	}
	if c.release != nil {
		errs = append(errs, c.release())
	}
	return errors.Join(errs...)
}

// WaitReady blocks until the server answers a cheap call (a one-item entry
// listing that returns IDs only), polling with capped exponential backoff.
// It returns nil once the server answers, ctx's error (wrapped, with the
// last failure) when ctx ends first, and the call's error at once if the
// server answers with anything but a transient failure (e.g.
// PERMISSION_DENIED), since waiting would not fix that.
func (c *Client) WaitReady(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	delay := c.readyDelay
	for attempt := 1; ; attempt++ {
		err := c.Probe(ctx)
		if err == nil {
			logger.V(2).Info("SPIRE server is ready", "attempts", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("wait for spire server: %w (last error: %v)", ctx.Err(), err)
		}
		if !transient(err) {
			return fmt.Errorf("wait for spire server: %w", err)
		}
		logger.V(2).Info("Waiting for SPIRE server", "attempt", attempt, "retryIn", delay, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for spire server: %w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, c.readyMaxDelay)
	}
}

// Probe asks SPIRE for one entry ID, within the probe timeout: the cheapest call that proves
// it answers.
func (c *Client) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.probeTimeout)
	defer cancel()
	start := time.Now()
	_, err := c.entries.ListEntries(ctx, &entryv1.ListEntriesRequest{
		PageSize: 1,
		// An empty mask returns only IDs: the probe needs no data.
		OutputMask: &types.EntryMask{},
	})
	logCall(ctx, "ListEntries", start, err, "probe", true)
	return err
}

// transient reports whether a readiness probe failure may go away by itself.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

func (c *Client) pageSize() int32 {
	if c.PageSize <= 0 {
		return DefaultPageSize
	}
	return int32(min(c.PageSize, math.MaxInt32))
}

func (c *Client) batchSize() int {
	if c.BatchSize <= 0 {
		return DefaultBatchSize
	}
	return c.BatchSize
}

// logCall records one RPC's timing at V(4): verbose enough for debugging
// without flooding normal logs on every resync.
func logCall(ctx context.Context, method string, start time.Time, err error, kv ...any) {
	logger := klog.FromContext(ctx).V(4)
	if !logger.Enabled() {
		return
	}
	kv = append([]any{"method", method, "duration", time.Since(start)}, kv...)
	if err != nil {
		kv = append(kv, "err", err)
	}
	logger.Info("SPIRE API call", kv...)
}
