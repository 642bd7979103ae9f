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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// noWrites is an inner client that any call reaches only by panicking: a dry run must answer
// every write itself.
type noWrites struct{ API }

func TestDryRunRecordsEveryPlannedWrite(t *testing.T) {
	var plan bytes.Buffer
	d := DryRun(noWrites{}, &plan)
	ctx := context.Background()
	entry := &types.Entry{SpiffeId: &types.SPIFFEID{TrustDomain: "example.org", Path: "/web"},
		ParentId: &types.SPIFFEID{TrustDomain: "example.org", Path: "/node"}, Selectors: []*types.Selector{{Type: "k8s", Value: "pod-uid:1"}}}
	created, err := d.CreateEntries(ctx, []*types.Entry{entry})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created[0].Entry.GetId(), "dry-run-") {
		t.Errorf("created entry has no stand-in ID: %q", created[0].Entry.GetId())
	}
	update := &types.Entry{Id: "e1", X509SvidTtl: 60}
	if _, err := d.UpdateEntries(ctx, []*types.Entry{update}, &types.EntryMask{X509SvidTtl: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteEntries(ctx, []string{"e2", "e3"}); err != nil {
		t.Fatal(err)
	}
	rel := &types.FederationRelationship{TrustDomain: "partner.org", BundleEndpointUrl: "https://partner.org/bundle",
		BundleEndpointProfile: &types.FederationRelationship_HttpsWeb{HttpsWeb: &types.HTTPSWebProfile{}}}
	if _, err := d.CreateFederationRelationships(ctx, []*types.FederationRelationship{rel}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteFederationRelationships(ctx, []string{"old.org"}); err != nil {
		t.Fatal(err)
	}

	type line struct {
		Op, Kind, ID, TrustDomain string
		Entry, Relationship, Mask map[string]any
	}
	var got []line
	scanner := bufio.NewScanner(&plan)
	for scanner.Scan() {
		var l line
		if err := json.Unmarshal(scanner.Bytes(), &l); err != nil {
			t.Fatalf("line %q is not JSON: %v", scanner.Text(), err)
		}
		got = append(got, l)
	}
	want := []line{
		{Op: "create", Kind: "entry", Entry: map[string]any{
			"spiffeId":  map[string]any{"trustDomain": "example.org", "path": "/web"},
			"parentId":  map[string]any{"trustDomain": "example.org", "path": "/node"},
			"selectors": []any{map[string]any{"type": "k8s", "value": "pod-uid:1"}}}},
		{Op: "update", Kind: "entry", ID: "e1", Entry: map[string]any{"id": "e1", "x509SvidTtl": float64(60)},
			Mask: map[string]any{"x509SvidTtl": true}},
		{Op: "delete", Kind: "entry", ID: "e2"},
		{Op: "delete", Kind: "entry", ID: "e3"},
		{Op: "create", Kind: "federationRelationship", TrustDomain: "partner.org", Relationship: map[string]any{
			"trustDomain": "partner.org", "bundleEndpointUrl": "https://partner.org/bundle", "httpsWeb": map[string]any{}}},
		{Op: "delete", Kind: "federationRelationship", TrustDomain: "old.org"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestDryRunFailsAWriteItCannotRecord(t *testing.T) {
	d := DryRun(noWrites{}, failingWriter{})
	if _, err := d.DeleteEntries(context.Background(), []string{"e1"}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("err = %v, want the plan's write error", err)
	}
}

func TestDryRunWithoutPlanWritesNothing(t *testing.T) {
	d := DryRun(noWrites{}, nil)
	if _, err := d.CreateFederationRelationships(context.Background(), []*types.FederationRelationship{{TrustDomain: "p.org"}}); err != nil {
		t.Fatal(err)
	}
}
