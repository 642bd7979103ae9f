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
	"errors"
	"testing"
	"time"

	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestNewDownstreamX509CAAgainstSPIRE checks against a real spire-server (1.15.3) what the
// fake imitates: a caller that is not downstream, even an admin one or one on the admin
// socket, is refused with exactly the fake's code and message and gets ErrNotDownstream;
// once its entry is marked downstream, it gets a CA that passes every check.
func TestNewDownstreamX509CAAgainstSPIRE(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real spire-server; skipped with -short")
	}
	admin := newTCPAdmin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tcp, err := DialTCP(ctx, admin.server.Address(), admin.creds, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tcp.Close() })
	local, err := Dial(ctx, admin.server.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })

	for name, c := range map[string]*Client{"admin over TCP": tcp, "admin socket": local} {
		_, err := c.Authority().NewDownstreamX509CA(ctx, time.Hour)
		if !errors.Is(err, ErrNotDownstream) {
			t.Fatalf("%s: err = %v, want ErrNotDownstream", name, err)
		}
		var spireErr interface{ GRPCStatus() *status.Status }
		if !errors.As(err, &spireErr) {
			t.Fatalf("%s: err = %v carries no gRPC status", name, err)
		}
		st := spireErr.GRPCStatus()
		if st.Code() != codes.PermissionDenied || st.Message() != "authorization denied for method /spire.api.server.svid.v1.SVID/NewDownstreamX509CA" {
			t.Errorf("%s: SPIRE answered %s %q; the fake answers otherwise", name, st.Code(), st.Message())
		}
	}

	e := entry(tcpAdminPath)
	e.Downstream = true
	if _, err := tcp.CreateEntries(ctx, []*types.Entry{e}); err != nil {
		t.Fatalf("create the caller's downstream entry: %v", err)
	}
	// SPIRE reads callers' entries from a cache it reloads every few seconds.
	var ca *DownstreamCA
	for {
		ca, err = tcp.Authority().NewDownstreamX509CA(ctx, 2*time.Hour)
		if !errors.Is(err, ErrNotDownstream) || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("NewDownstreamX509CA with a downstream entry: %v", err)
	}
	if !ca.Chain[0].IsCA || len(ca.Authorities) == 0 {
		t.Errorf("CA: IsCA %v, %d authorities", ca.Chain[0].IsCA, len(ca.Authorities))
	}
	if got := ca.Chain[0].NotAfter.Sub(ca.Chain[0].NotBefore); got < 2*time.Hour || got > 2*time.Hour+time.Minute {
		t.Errorf("CA lifetime %v, want the preferred 2h (plus SPIRE's backdating)", got)
	}
}
