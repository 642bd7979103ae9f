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

package realcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	trustdomainv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/trustdomain/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// The proxy is tested here in front of the in-process fake; test/spireversions'
// TestOlderServer puts it in front of a real spire-server.

func dialSocket(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func entryWithAttributes(path string) *types.Entry {
	return &types.Entry{
		SpiffeId:  &types.SPIFFEID{TrustDomain: "example.org", Path: path},
		ParentId:  &types.SPIFFEID{TrustDomain: "example.org", Path: "/agent"},
		Selectors: []*types.Selector{{Type: "unix", Value: "uid:1000"}},
		Hint:      path,
		AdditionalAttributes: &types.Entry_AdditionalAttributes{
			DisableX509SvidPrefetch: true, JwtSvidIncludeJti: true},
	}
}

// TestSPIREProxyForwardsUnchanged: without a rewrite the proxy is transparent, for every
// service, for item results and for a call's own status.
func TestSPIREProxyForwardsUnchanged(t *testing.T) {
	server := spiretest.New(t)
	proxy := NewSPIREProxy(t, server.SocketPath(), nil)
	conn := dialSocket(t, proxy.SocketPath())
	ctx := t.Context()

	entries := entryv1.NewEntryClient(conn)
	created, err := entries.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{entryWithAttributes("/a")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := created.GetResults()[0].GetEntry().GetAdditionalAttributes(); !got.GetJwtSvidIncludeJti() {
		t.Errorf("created entry's attributes %v, want them kept", got)
	}
	direct, err := entryv1.NewEntryClient(dialSocket(t, server.SocketPath())).ListEntries(ctx, &entryv1.ListEntriesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	viaProxy, err := entries.ListEntries(ctx, &entryv1.ListEntriesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(direct, viaProxy, protocmp.Transform()); diff != "" {
		t.Errorf("listing through the proxy differs from the server's (-direct +proxy):\n%s", diff)
	}

	_, err = entries.GetEntry(ctx, &entryv1.GetEntryRequest{Id: "missing"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("GetEntry of a missing ID: %v, want NotFound", err)
	}
	if _, err := trustdomainv1.NewTrustDomainClient(conn).ListFederationRelationships(ctx,
		&trustdomainv1.ListFederationRelationshipsRequest{}); err != nil {
		t.Errorf("trust domain service through the proxy: %v", err)
	}
}

// TestSPIREProxyDropsAdditionalAttributes: with DropAdditionalAttributes, attributes sent
// through the proxy never reach the server, and those the server holds never come out.
func TestSPIREProxyDropsAdditionalAttributes(t *testing.T) {
	server := spiretest.New(t)
	proxy := NewSPIREProxy(t, server.SocketPath(), DropAdditionalAttributes)
	viaProxy := entryv1.NewEntryClient(dialSocket(t, proxy.SocketPath()))
	direct := entryv1.NewEntryClient(dialSocket(t, server.SocketPath()))
	ctx := t.Context()

	created, err := viaProxy.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{entryWithAttributes("/through-proxy")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := created.GetResults()[0].GetEntry(); got.GetHint() != "/through-proxy" || got.AdditionalAttributes != nil {
		t.Errorf("entry created through the proxy: %v, want its hint and no attributes", got)
	}
	if _, err := direct.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{entryWithAttributes("/direct")}}); err != nil {
		t.Fatal(err)
	}

	held := map[string]bool{} // hint → whether the server holds attributes
	resp, err := direct.ListEntries(ctx, &entryv1.ListEntriesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range resp.GetEntries() {
		held[e.GetHint()] = e.AdditionalAttributes != nil
	}
	if want := map[string]bool{"/through-proxy": false, "/direct": true}; !cmp.Equal(held, want) {
		t.Errorf("server holds attributes %v, want %v", held, want)
	}
	resp, err = viaProxy.ListEntries(ctx, &entryv1.ListEntriesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range resp.GetEntries() {
		if e.AdditionalAttributes != nil {
			t.Errorf("entry %s listed through the proxy has attributes %v", e.GetHint(), e.AdditionalAttributes)
		}
	}
}

// TestDropAdditionalAttributes: the field goes from entries and masks at any depth, and
// nothing else changes.
func TestDropAdditionalAttributes(t *testing.T) {
	attrs := &types.Entry_AdditionalAttributes{JwtSvidIncludeJti: true}
	for name, tc := range map[string]struct{ in, want proto.Message }{
		"update request": {
			in: &entryv1.BatchUpdateEntryRequest{
				Entries:    []*types.Entry{{Id: "a", Hint: "h", AdditionalAttributes: attrs}},
				InputMask:  &types.EntryMask{Hint: true, AdditionalAttributes: true},
				OutputMask: &types.EntryMask{AdditionalAttributes: true},
			},
			want: &entryv1.BatchUpdateEntryRequest{
				Entries:    []*types.Entry{{Id: "a", Hint: "h"}},
				InputMask:  &types.EntryMask{Hint: true},
				OutputMask: &types.EntryMask{},
			},
		},
		"create response": {
			in: &entryv1.BatchCreateEntryResponse{Results: []*entryv1.BatchCreateEntryResponse_Result{
				{Status: &types.Status{Message: "OK"}, Entry: &types.Entry{Id: "a", AdditionalAttributes: attrs}},
				{Status: &types.Status{Code: int32(codes.AlreadyExists)}},
			}},
			want: &entryv1.BatchCreateEntryResponse{Results: []*entryv1.BatchCreateEntryResponse_Result{
				{Status: &types.Status{Message: "OK"}, Entry: &types.Entry{Id: "a"}},
				{Status: &types.Status{Code: int32(codes.AlreadyExists)}},
			}},
		},
		"entry": {
			in:   &types.Entry{Id: "a", AdditionalAttributes: &types.Entry_AdditionalAttributes{}},
			want: &types.Entry{Id: "a"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			DropAdditionalAttributes(tc.in)
			if diff := cmp.Diff(tc.want, tc.in, protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
