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

package spireversions

import (
	"context"
	"testing"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestOlderServer runs spire-registrar, built against SPIRE 1.15's API, on a server whose entry
// API predates additional_attributes, as SPIRE 1.13's does: the real 1.15.3 server behind
// realcluster.SPIREProxy with DropAdditionalAttributes, since that field (16 of Entry and of
// EntryMask) is all that tells the two entry APIs apart on the wire. Every optional field it
// sets (hint, jwtSvidTtl, storeSvid, x509SvidTtl, dnsNames) lands; full resyncs then write
// nothing: no entry's revision moves, so nothing the older server answers differently is
// mistaken for drift; and a change to the resource is one update of the same entry.
func TestOlderServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real kube-apiserver and spire-server; skipped with -short")
	}
	stack := realcluster.NewStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	older := realcluster.NewSPIREProxy(t, stack.SPIRE.SocketPath(), realcluster.DropAdditionalAttributes)
	// The oracle reads the server itself, not through the proxy.
	entries := entryClient(t, stack.SPIRE.SocketPath())
	t.Run("the proxy answers as an older server", func(t *testing.T) {
		checkOlderEntryAPI(ctx, t, entryClient(t, older.SocketPath()), entries, stack.SPIRE.TrustDomain())
	})
	if t.Failed() {
		return
	}
	runController(ctx, t, stack, older.SocketPath())

	td := stack.SPIRE.TrustDomain()
	cse := &spirev1alpha1.ClusterStaticEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: spirev1alpha1.ClusterStaticEntrySpec{
			SPIFFEID:    "spiffe://" + td + "/db",
			ParentID:    "spiffe://" + td + "/spire/agent/x",
			Selectors:   []string{"unix:uid:1000"},
			Hint:        "db",
			StoreSVID:   true,
			X509SVIDTTL: metav1.Duration{Duration: 30 * time.Minute},
			JWTSVIDTTL:  metav1.Duration{Duration: 5 * time.Minute},
			DNSNames:    []string{"db.example.org"},
		},
	}
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterStaticEntries().Create(ctx, cse, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	entry := waitForEntry(ctx, t, entries, func(e *types.Entry) bool { return e.GetHint() == "db" })
	if !entry.GetStoreSvid() || entry.GetX509SvidTtl() != 1800 || entry.GetJwtSvidTtl() != 300 || len(entry.GetDnsNames()) != 1 {
		t.Errorf("entry written through the older API lacks a field: %v", entry)
	}

	// Three full resyncs later nothing was rewritten.
	time.Sleep(7 * time.Second)
	resp, err := entries.ListEntries(ctx, &entryv1.ListEntriesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetEntries()); n != 1 {
		t.Fatalf("%d entries after the resyncs, want 1", n)
	}
	if got := resp.GetEntries()[0]; got.GetId() != entry.GetId() || got.GetRevisionNumber() != entry.GetRevisionNumber() {
		t.Errorf("full resyncs rewrote the entry: %s rev %d → %s rev %d",
			entry.GetId(), entry.GetRevisionNumber(), got.GetId(), got.GetRevisionNumber())
	}

	// An update goes through the older API's BatchUpdateEntry, mask and all.
	latest, err := stack.SpireAPI.SpireV1alpha1().ClusterStaticEntries().Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	latest.Spec.Hint = "db-2"
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterStaticEntries().Update(ctx, latest, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := waitForEntry(ctx, t, entries, func(e *types.Entry) bool { return e.GetHint() == "db-2" })
	if updated.GetId() != entry.GetId() || !updated.GetStoreSvid() || updated.GetJwtSvidTtl() != 300 {
		t.Errorf("after the update: %v, want entry %s with its other fields kept", updated, entry.GetId())
	}
}

// checkOlderEntryAPI shows that older, the proxy, answers as a server that does not know
// additional_attributes while the server behind it, direct, keeps them: attributes sent
// through the proxy never reach the server, those the server holds never come out, and an
// update whose mask names only them changes nothing. It leaves the server without entries.
func checkOlderEntryAPI(ctx context.Context, t *testing.T, older, direct entryv1.EntryClient, td string) {
	t.Helper()
	attrs := &types.Entry_AdditionalAttributes{DisableX509SvidPrefetch: true, JwtSvidIncludeJti: true}
	created, err := older.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{{
		SpiffeId:             &types.SPIFFEID{TrustDomain: td, Path: "/probe"},
		ParentId:             &types.SPIFFEID{TrustDomain: td, Path: "/spire/agent/x"},
		Selectors:            []*types.Selector{{Type: "unix", Value: "uid:1001"}},
		AdditionalAttributes: attrs,
	}}})
	if err != nil || codes.Code(created.GetResults()[0].GetStatus().GetCode()) != codes.OK {
		t.Fatalf("creating through the proxy: %v %v", err, created.GetResults())
	}
	id := created.GetResults()[0].GetEntry().GetId()
	t.Cleanup(func() {
		// The controller, started next, would own the probe: it must be gone by then.
		_, _ = direct.BatchDeleteEntry(context.WithoutCancel(ctx), &entryv1.BatchDeleteEntryRequest{Ids: []string{id}})
	})
	if got := created.GetResults()[0].GetEntry().GetAdditionalAttributes(); got != nil {
		t.Errorf("entry created through the proxy came back with attributes %v", got)
	}
	onServer := func() *types.Entry_AdditionalAttributes {
		t.Helper()
		e, err := direct.GetEntry(ctx, &entryv1.GetEntryRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		return e.GetAdditionalAttributes()
	}
	if got := onServer(); got.GetDisableX509SvidPrefetch() || got.GetJwtSvidIncludeJti() {
		t.Errorf("attributes sent through the proxy reached the server: %v", got)
	}

	// Set directly, the server keeps them; through the proxy they are not there.
	set, err := direct.BatchUpdateEntry(ctx, &entryv1.BatchUpdateEntryRequest{
		Entries:   []*types.Entry{{Id: id, AdditionalAttributes: attrs}},
		InputMask: &types.EntryMask{AdditionalAttributes: true},
	})
	if err != nil || codes.Code(set.GetResults()[0].GetStatus().GetCode()) != codes.OK {
		t.Fatalf("setting attributes on the server: %v %v", err, set.GetResults())
	}
	if got := onServer(); !got.GetDisableX509SvidPrefetch() || !got.GetJwtSvidIncludeJti() {
		t.Fatalf("the server did not keep attributes set directly: %v", got)
	}
	seen, err := older.GetEntry(ctx, &entryv1.GetEntryRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := older.ListEntries(ctx, &entryv1.ListEntriesRequest{OutputMask: &types.EntryMask{AdditionalAttributes: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.GetEntries()) != 1 {
		t.Fatalf("%d entries listed through the proxy, want 1", len(listed.GetEntries()))
	}
	if seen.GetAdditionalAttributes() != nil || listed.GetEntries()[0].GetAdditionalAttributes() != nil {
		t.Errorf("the server's attributes came out of the proxy: get %v, list %v",
			seen.GetAdditionalAttributes(), listed.GetEntries()[0].GetAdditionalAttributes())
	}

	// A mask naming only the attributes names nothing an older server knows: clearing them
	// through the proxy leaves them be.
	cleared, err := older.BatchUpdateEntry(ctx, &entryv1.BatchUpdateEntryRequest{
		Entries:   []*types.Entry{{Id: id}},
		InputMask: &types.EntryMask{AdditionalAttributes: true},
	})
	if err != nil || codes.Code(cleared.GetResults()[0].GetStatus().GetCode()) != codes.OK {
		t.Fatalf("updating through the proxy: %v %v", err, cleared.GetResults())
	}
	if got := onServer(); !got.GetDisableX509SvidPrefetch() || !got.GetJwtSvidIncludeJti() {
		t.Errorf("an update through the proxy whose mask names only the attributes changed them: %v", got)
	}
}
