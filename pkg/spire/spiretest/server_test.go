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

package spiretest

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	trustdomainv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/trustdomain/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
)

func dial(t *testing.T, s *Server) (entryv1.EntryClient, trustdomainv1.TrustDomainClient) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+s.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return entryv1.NewEntryClient(conn), trustdomainv1.NewTrustDomainClient(conn)
}

func workload(path string) *types.Entry {
	return &types.Entry{
		SpiffeId:  &types.SPIFFEID{TrustDomain: DefaultTrustDomain, Path: path},
		ParentId:  &types.SPIFFEID{TrustDomain: DefaultTrustDomain, Path: "/spire/agent/x"},
		Selectors: []*types.Selector{{Type: "unix", Value: "uid:1"}},
	}
}

func TestEntryBehaviour(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(s *Server)
		entry func() *types.Entry
		want  codes.Code
	}{
		{name: "valid", entry: func() *types.Entry { return workload("/a") }, want: codes.OK},
		{name: "reserved path", entry: func() *types.Entry { return workload("/spire/x") }, want: codes.InvalidArgument},
		{
			name:  "other trust domain",
			setup: func(s *Server) { s.SetTrustDomain("other.org") },
			entry: func() *types.Entry { return workload("/a") },
			want:  codes.InvalidArgument,
		},
		{
			name: "bad DNS name",
			entry: func() *types.Entry {
				e := workload("/a")
				e.DnsNames = []string{"bad name"}
				return e
			},
			want: codes.InvalidArgument,
		},
		{
			name:  "federates with a trust domain without bundle",
			setup: func(s *Server) { s.RequireFederatedBundles(true) },
			entry: func() *types.Entry {
				e := workload("/a")
				e.FederatesWith = []string{"fed.org"}
				return e
			},
			want: codes.Internal,
		},
		{
			name:  "federates with a trust domain with bundle",
			setup: func(s *Server) { s.RequireFederatedBundles(true); s.SetBundles("fed.org") },
			entry: func() *types.Entry {
				e := workload("/a")
				e.FederatesWith = []string{"spiffe://fed.org"}
				return e
			},
			want: codes.OK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t)
			if tt.setup != nil {
				tt.setup(s)
			}
			ec, _ := dial(t, s)
			resp, err := ec.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{tt.entry()}})
			if err != nil {
				t.Fatalf("BatchCreateEntry: %v", err)
			}
			if got := codes.Code(resp.Results[0].Status.Code); got != tt.want {
				t.Fatalf("status = %v (%s), want %v", got, resp.Results[0].Status.Message, tt.want)
			}
			if tt.want == codes.OK {
				e := resp.Results[0].Entry
				if len(e.Id) != 36 || e.CreatedAt == 0 || e.RevisionNumber != 0 {
					t.Errorf("created entry = %v, want UUID, creation time and revision 0", e)
				}
				for _, td := range e.FederatesWith {
					if td != "fed.org" {
						t.Errorf("federates_with not normalized to a name: %q", td)
					}
				}
			}
		})
	}
}

func TestOutputMaskAndGetEntry(t *testing.T) {
	ctx := context.Background()
	s := New(t)
	e := workload("/a")
	e.Id = "a"
	e.Hint = "h"
	s.SetEntries(e)
	ec, _ := dial(t, s)

	resp, err := ec.ListEntries(ctx, &entryv1.ListEntriesRequest{OutputMask: &types.EntryMask{Hint: true}})
	if err != nil {
		t.Fatalf("ListEntries: %v", err)
	}
	// The ID always comes back; of the rest, only what the mask asks for.
	want := []*types.Entry{{Id: "a", Hint: "h"}}
	if diff := cmp.Diff(want, resp.Entries, protocmp.Transform()); diff != "" {
		t.Errorf("masked entries (-want +got):\n%s", diff)
	}
	if _, err := ec.GetEntry(ctx, &entryv1.GetEntryRequest{Id: "a"}); err != nil {
		t.Errorf("GetEntry: %v", err)
	}
	if _, err := ec.GetEntry(ctx, &entryv1.GetEntryRequest{Id: "b"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetEntry of a missing entry = %v, want NOT_FOUND", err)
	}
}

func TestFaultsCountersAndRestart(t *testing.T) {
	ctx := context.Background()
	s := New(t)
	ec, _ := dial(t, s)
	s.FailNext(MethodBatchCreateEntry, 2, codes.ResourceExhausted)

	req := &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{workload("/a")}}
	for i := range 2 {
		if _, err := ec.BatchCreateEntry(ctx, req); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("call %d = %v, want injected RESOURCE_EXHAUSTED", i, err)
		}
	}
	if _, err := ec.BatchCreateEntry(ctx, req); err != nil {
		t.Fatalf("call after faults ran out: %v", err)
	}
	if n := s.Calls(MethodBatchCreateEntry); n != 3 {
		t.Errorf("Calls = %d, want 3", n)
	}
	if n := s.WriteCalls(); n != 3 {
		t.Errorf("WriteCalls = %d, want 3", n)
	}

	s.Stop()
	if _, err := ec.ListEntries(ctx, &entryv1.ListEntriesRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("ListEntries while stopped = %v, want UNAVAILABLE", err)
	}
	s.Start()
	ec, _ = dial(t, s)
	resp, err := ec.ListEntries(ctx, &entryv1.ListEntriesRequest{})
	if err != nil || len(resp.Entries) != 1 {
		t.Fatalf("ListEntries after restart = %v, %v; want the one entry", resp, err)
	}
	s.ResetCalls()
	if n := s.Calls(MethodListEntries); n != 0 {
		t.Errorf("Calls after reset = %d", n)
	}
}

func TestRelationshipBundleKeptOnUpdateWithoutBundle(t *testing.T) {
	ctx := context.Background()
	s := New(t)
	_, tc := dial(t, s)
	rel := &types.FederationRelationship{
		TrustDomain:           "fed.org",
		BundleEndpointUrl:     "https://fed.org/b",
		BundleEndpointProfile: &types.FederationRelationship_HttpsWeb{HttpsWeb: &types.HTTPSWebProfile{}},
		TrustDomainBundle:     &types.Bundle{TrustDomain: "fed.org"},
	}
	if _, err := tc.BatchCreateFederationRelationship(ctx, &trustdomainv1.BatchCreateFederationRelationshipRequest{FederationRelationships: []*types.FederationRelationship{rel}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	rel.TrustDomainBundle = nil
	rel.BundleEndpointUrl = "https://fed.org/c"
	resp, err := tc.BatchUpdateFederationRelationship(ctx, &trustdomainv1.BatchUpdateFederationRelationshipRequest{FederationRelationships: []*types.FederationRelationship{rel}})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	got := resp.Results[0].FederationRelationship
	if got.BundleEndpointUrl != "https://fed.org/c" || got.TrustDomainBundle == nil {
		t.Errorf("updated relationship = %v, want new URL and the bundle kept", got)
	}
}
