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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const tcpAdminPath = "/spire-registrar"

// tcpAdmin is a real spire-server whose TCP API grants the admin API to tcpAdminPath, and
// the mTLS credentials that present it.
type tcpAdmin struct {
	server *realcluster.SPIRE
	creds  credentials.TransportCredentials
}

// newTCPAdmin starts spire-server and mints, over its admin socket, an X509-SVID for
// tcpAdminPath to present over TCP.
func newTCPAdmin(t *testing.T) *tcpAdmin {
	t.Helper()
	td := spiffeid.RequireTrustDomainFromString(realcluster.DefaultTrustDomain)
	adminID := spiffeid.RequireFromPath(td, tcpAdminPath)
	srv := realcluster.NewSPIRE(t, realcluster.SPIREOptions{AdminIDs: []string{adminID.String()}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	local, err := Dial(ctx, srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = local.Close() }()
	if err := local.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	minted, err := local.Authority().MintX509SVID(ctx, key, adminID.URL(), nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := local.Authority().X509Authorities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	svid := &x509svid.SVID{ID: adminID, Certificates: minted.Chain, PrivateKey: key}
	bundle := x509bundle.FromX509Authorities(td, roots)
	serverID := spiffeid.RequireFromPath(td, "/spire/server")
	return &tcpAdmin{
		server: srv,
		creds:  credentials.NewTLS(tlsconfig.MTLSClientConfig(svid, bundle, tlsconfig.AuthorizeID(serverID))),
	}
}

// dial returns a client for the server's TCP API through a new blackhole proxy, with its
// first call answered, so that a connection is open.
func (a *tcpAdmin) dial(t *testing.T, opts ...grpc.DialOption) (*Client, *blackholeProxy) {
	t.Helper()
	proxy := newBlackholeProxy(t, a.server.Address())
	c, err := DialTCP(t.Context(), proxy.Addr(), a.creds, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c, proxy
}

// createOne creates one entry named path and returns the call's error, item errors included.
func createOne(ctx context.Context, c *Client, path string) error {
	res, err := c.CreateEntries(ctx, []*types.Entry{entry(path)})
	if err != nil {
		return err
	}
	return res[0].Err
}

// createInBackground starts createOne and returns the channel its error and duration arrive on.
func createInBackground(c *Client, path string) <-chan timedErr {
	done := make(chan timedErr, 1)
	go func() {
		start := time.Now()
		err := createOne(context.Background(), c, path)
		done <- timedErr{err, time.Since(start)}
	}()
	return done
}

type timedErr struct {
	err  error
	took time.Duration
}

// awaitCall waits at most hang for a call started by createInBackground, failing the test
// if it is still waiting then.
func awaitCall(t *testing.T, done <-chan timedErr, hang time.Duration) timedErr {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(hang):
		t.Fatalf("a write on the blackholed connection is still waiting after %v", hang)
		return timedErr{}
	}
}

// TestSPIRECallsOverADeadPath runs a real spire-server's TCP API behind a proxy that can
// stop forwarding without closing anything, the way a dead network path behaves.
func TestSPIRECallsOverADeadPath(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real spire-server")
	}
	admin := newTCPAdmin(t)

	// The per-call deadline ends a write on a dead path, and the connection serves again
	// once the path is back.
	t.Run("deadline ends a blackholed write", func(t *testing.T) {
		t.Parallel()
		c, proxy := admin.dial(t)
		const bound = 2 * time.Second // shorter than keepalive's detection, so the deadline ends it
		c.cc.timeout = bound
		if err := createOne(t.Context(), c, "/before"); err != nil {
			t.Fatalf("write before the blackhole: %v", err)
		}

		proxy.Blackhole()
		r := awaitCall(t, createInBackground(c, "/during"), 10*bound)
		t.Logf("blackholed write returned after %v: %v", r.took.Round(time.Millisecond), r.err)
		if status.Code(r.err) != codes.DeadlineExceeded {
			t.Fatalf("blackholed write: %v, want DeadlineExceeded", r.err)
		}
		if r.took < bound || r.took > bound+2*time.Second {
			t.Errorf("blackholed write returned after %v, want about %v", r.took, bound)
		}

		proxy.Restore()
		if err := createOne(t.Context(), c, "/after"); err != nil {
			t.Fatalf("write after the path is back: %v", err)
		}
		if accepted, _ := proxy.Stats(); accepted != 1 {
			t.Errorf("the proxy accepted %d connections, want the one connection to serve again", accepted)
		}
	})

	// Keepalive finds the dead path during a call the deadline would let wait longer, closes
	// the connection, and the next call dials a new one.
	t.Run("keepalive closes a dead connection", func(t *testing.T) {
		t.Parallel()
		c, proxy := admin.dial(t)
		c.cc.timeout = 2 * time.Minute // out of the way: keepalive alone must end the call
		if err := createOne(t.Context(), c, "/ka-before"); err != nil {
			t.Fatalf("write before the blackhole: %v", err)
		}

		proxy.Blackhole()
		r := awaitCall(t, createInBackground(c, "/ka-during"), time.Minute)
		t.Logf("blackholed write returned after %v: %v", r.took.Round(time.Millisecond), r.err)
		if status.Code(r.err) != codes.Unavailable {
			t.Fatalf("blackholed write: %v, want Unavailable", r.err)
		}
		if limit := keepaliveTime + keepaliveTimeout + 3*time.Second; r.took > limit {
			t.Errorf("blackholed write returned after %v, want within %v", r.took, limit)
		}

		// The path stays dead for the old connection; a new one is forwarded.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := c.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if err := createOne(t.Context(), c, "/ka-after"); err != nil {
			t.Fatalf("write on a new connection: %v", err)
		}
		if accepted, _ := proxy.Stats(); accepted != 2 {
			t.Errorf("the proxy accepted %d connections, want 2: the dead one and its replacement", accepted)
		}
	})

	// SPIRE keeps gRPC's default keepalive enforcement; the client's keepalive must not get
	// its connection closed for too many pings: not over a long idle time, nor over short
	// ones after which it pings as the next call starts. longIdle is long enough for a
	// client pinging every 10 s while idle to be told to hang up (the case below).
	const longIdle = 45 * time.Second
	t.Run("the server keeps a connection with the client's keepalive", func(t *testing.T) {
		t.Parallel()
		c, proxy := admin.dial(t)
		for i, idle := range []time.Duration{longIdle, keepaliveTime + time.Second, keepaliveTime + time.Second} {
			time.Sleep(idle) // idle on purpose: the test is about time without calls
			if err := createOne(t.Context(), c, fmt.Sprintf("/idle-%d", i)); err != nil {
				t.Fatalf("write after %v idle: %v", idle, err)
			}
		}
		if accepted, closedByServer := proxy.Stats(); accepted != 1 || closedByServer != 0 {
			t.Errorf("the proxy accepted %d connections, %d closed by the server; want one connection, never closed",
				accepted, closedByServer)
		}
	})

	// Pings while no call is in flight, every 10 s (gRPC's shortest), get an idle connection
	// closed: the enforcement the case above respects is real.
	t.Run("the server closes a connection pinged while idle", func(t *testing.T) {
		t.Parallel()
		c, proxy := admin.dial(t, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: 10 * time.Second, Timeout: keepaliveTimeout, PermitWithoutStream: true,
		}))
		time.Sleep(longIdle) // idle on purpose: pings without calls
		if err := createOne(t.Context(), c, "/pinged"); err != nil {
			t.Fatalf("write after %v idle: %v", longIdle, err)
		}
		if accepted, _ := proxy.Stats(); accepted != 2 {
			t.Errorf("the proxy accepted %d connections, want 2: SPIRE closes the pinged one", accepted)
		}
	})
}
