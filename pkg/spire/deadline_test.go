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
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// silentServer serves gRPC on a unix socket and answers no call: each one waits until the
// client gives up. started receives each call's method as it arrives.
func silentServer(t *testing.T) (socket string, started <-chan string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "silent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket = filepath.Join(dir, "api.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan string, 16)
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		calls <- method
		<-stream.Context().Done()
		return stream.Context().Err()
	}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return socket, calls
}

// TestEveryCallHasADeadline calls each method of the client against a server that never
// answers: each must end with codes.DeadlineExceeded once the client's own bound is up.
func TestEveryCallHasADeadline(t *testing.T) {
	const bound = 200 * time.Millisecond
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := &url.URL{Scheme: "spiffe", Host: testTD, Path: "/w"}
	calls := []struct {
		method string
		call   func(ctx context.Context, c *Client) error
	}{
		{"/spire.api.server.entry.v1.Entry/ListEntries", func(ctx context.Context, c *Client) error {
			_, err := c.ListEntries(ctx)
			return err
		}},
		{"/spire.api.server.entry.v1.Entry/BatchCreateEntry", func(ctx context.Context, c *Client) error {
			_, err := c.CreateEntries(ctx, entries(1))
			return err
		}},
		{"/spire.api.server.entry.v1.Entry/BatchUpdateEntry", func(ctx context.Context, c *Client) error {
			e := entry("/w")
			e.Id = "id"
			_, err := c.UpdateEntries(ctx, []*types.Entry{e}, nil)
			return err
		}},
		{"/spire.api.server.entry.v1.Entry/BatchDeleteEntry", func(ctx context.Context, c *Client) error {
			_, err := c.DeleteEntries(ctx, []string{"id"})
			return err
		}},
		{"/spire.api.server.trustdomain.v1.TrustDomain/ListFederationRelationships", func(ctx context.Context, c *Client) error {
			_, err := c.ListFederationRelationships(ctx)
			return err
		}},
		{"/spire.api.server.trustdomain.v1.TrustDomain/BatchCreateFederationRelationship", func(ctx context.Context, c *Client) error {
			_, err := c.CreateFederationRelationships(ctx, []*types.FederationRelationship{relationship("a.test")})
			return err
		}},
		{"/spire.api.server.trustdomain.v1.TrustDomain/BatchUpdateFederationRelationship", func(ctx context.Context, c *Client) error {
			_, err := c.UpdateFederationRelationships(ctx, []*types.FederationRelationship{relationship("a.test")}, nil)
			return err
		}},
		{"/spire.api.server.trustdomain.v1.TrustDomain/BatchDeleteFederationRelationship", func(ctx context.Context, c *Client) error {
			_, err := c.DeleteFederationRelationships(ctx, []string{"a.test"})
			return err
		}},
		{"/spire.api.server.svid.v1.SVID/MintX509SVID", func(ctx context.Context, c *Client) error {
			_, err := c.Authority().MintX509SVID(ctx, key, id, nil, time.Hour)
			return err
		}},
		{"/spire.api.server.bundle.v1.Bundle/GetBundle", func(ctx context.Context, c *Client) error {
			_, err := c.Authority().X509Authorities(ctx)
			return err
		}},
	}
	socket, started := silentServer(t)
	c, err := Dial(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.cc.timeout = bound
	for _, tc := range calls {
		t.Run(tc.method[strings.LastIndex(tc.method, "/")+1:], func(t *testing.T) {
			start := time.Now()
			err := tc.call(context.Background(), c)
			took := time.Since(start)
			if got := <-started; got != tc.method {
				t.Errorf("server saw %s, want %s", got, tc.method)
			}
			if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "did not answer "+tc.method+" within 200ms") {
				t.Fatalf("err = %v, want DeadlineExceeded naming the method and the bound", err)
			}
			if took < bound || took > bound+2*time.Second {
				t.Errorf("the call took %v, want about %v", took, bound)
			}
		})
	}
}

// TestCallerDeadlineWinsWhenSooner checks that a caller's own deadline, shorter than the
// client's bound, ends the call, with the caller's error unchanged.
func TestCallerDeadlineWinsWhenSooner(t *testing.T) {
	socket, started := silentServer(t)
	c, err := Dial(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.cc.timeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.DeleteEntries(ctx, []string{"id"})
	took := time.Since(start)
	<-started
	if status.Code(err) != codes.DeadlineExceeded || strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("err = %v, want the caller's DeadlineExceeded", err)
	}
	if took > 5*time.Second {
		t.Errorf("the call took %v, want about the caller's 100ms", took)
	}
}

// TestBatchedWritesEndAtTheDeadline checks the path a reconciler's write takes while it holds
// its scope's lock: batched calls run without any caller's deadline, so the client's own
// bound is what ends them, and a caller waiting for a batch that another caller's write
// keeps busy is released too.
func TestBatchedWritesEndAtTheDeadline(t *testing.T) {
	const bound = 300 * time.Millisecond
	socket, started := silentServer(t)
	c, err := Dial(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.cc.timeout = bound
	api := NewBatchedAPI(c, BatchingOptions{})
	t.Cleanup(api.Close)

	first := make(chan error, 1)
	go func() {
		_, err := api.CreateEntries(context.Background(), entries(1))
		first <- err
	}()
	<-started // the first write is in flight: the second waits in a pending batch
	start := time.Now()
	_, err = api.CreateEntries(context.Background(), []*types.Entry{entry("/second")})
	took := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("second write: %v, want DeadlineExceeded", err)
	}
	if took > 2*bound+2*time.Second {
		t.Errorf("the second write took %v, want at most about two bounds (%v)", took, 2*bound)
	}
	if err := <-first; status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("first write: %v, want DeadlineExceeded", err)
	}
}
