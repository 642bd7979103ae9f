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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestOlderServer runs spire-registrar, built against SPIRE 1.15's API, on a SPIRE 1.13.3
// server: every optional field it sets (hint, jwtSvidTtl, storeSvid, ttl) lands, and full
// resyncs then write nothing: no entry's revision moves, so nothing the older server answers
// differently is mistaken for drift.
func TestOlderServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real kube-apiserver and spire-server 1.13.3; skipped with -short")
	}
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SPIRE: realcluster.SPIREOptions{Server: realcluster.SPIREServer113}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if version, err := stack.SPIRE.Version(ctx); err != nil || version[:6] != "1.13.3" {
		t.Fatalf("server version %q, %v; want 1.13.3", version, err)
	}
	runController(ctx, t, stack)

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
	entries := entryClient(t, stack.SPIRE.SocketPath())
	entry := waitForEntry(ctx, t, entries, func(e *types.Entry) bool { return e.GetHint() == "db" })
	if !entry.GetStoreSvid() || entry.GetX509SvidTtl() != 1800 || entry.GetJwtSvidTtl() != 300 || len(entry.GetDnsNames()) != 1 {
		t.Errorf("entry on the 1.13.3 server lacks a field: %v", entry)
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
}
