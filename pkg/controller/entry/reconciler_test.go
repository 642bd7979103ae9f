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

package entry

import (
	"slices"
	"strings"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

func sid(path string) *spiretypes.SPIFFEID {
	return &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: path}
}

func podEntry(id, uid, path string, dns ...string) *spiretypes.Entry {
	return &spiretypes.Entry{
		Id:        id,
		SpiffeId:  sid(path),
		ParentId:  sid("/node"),
		Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:" + uid}},
		DnsNames:  dns,
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func declare(e *spiretypes.Entry, name string, age time.Duration, uid string) *render.DeclaredEntry {
	return render.NewDeclaredEntry(e, render.Declarer{Kind: render.KindClusterSPIFFEID, Name: name, Created: t0.Add(-age), PodUID: types.UID(uid)})
}

func ids(entries []*spiretypes.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.GetId())
	}
	slices.Sort(out)
	return out
}

func names(ds []*render.DeclaredEntry) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Declarer.Name)
	}
	slices.Sort(out)
	return out
}

func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name       string
		declared   []*render.DeclaredEntry
		current    []*spiretypes.Entry
		wantCreate []string // SPIFFE ID paths
		wantUpdate []string // current IDs
		wantDelete []string // current IDs
		wantInSync []string // declarer names
		wantMasked []string // declarer names
	}{
		{
			name:       "new entry is created",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "csid-a", 0, "p1")},
			wantCreate: []string{"/a"},
		},
		{
			name:       "equal entry is left alone",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a", "x.example"), "csid-a", 0, "p1")},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a", "x.example")},
			wantInSync: []string{"csid-a"},
		},
		{
			name:       "outdated field is updated in place",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a", "x.example", "y.example"), "csid-a", 0, "p1")},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a", "x.example")},
			wantUpdate: []string{"e1"},
		},
		{
			name:       "undeclared entry is deleted",
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a")},
			wantDelete: []string{"e1"},
		},
		{
			name:     "oldest declarer wins, the other is masked",
			declared: []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "young", time.Hour, "p1"), declare(podEntry("", "p1", "/a"), "old", 2*time.Hour, "p1")},
			current:  []*spiretypes.Entry{podEntry("e1", "p1", "/a")},
			// The winner is in sync; the loser is masked whatever order they came in.
			wantInSync: []string{"old"},
			wantMasked: []string{"young"},
		},
		{
			name:       "equal ages fall back to name order",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "b", 0, "p1"), declare(podEntry("", "p1", "/a"), "a", 0, "p1")},
			wantCreate: []string{"/a"},
			wantMasked: []string{"b"},
		},
		{
			name:       "duplicates in SPIRE: the oldest is kept",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "csid-a", 0, "p1")},
			current:    []*spiretypes.Entry{withCreated(podEntry("e2", "p1", "/a"), 20), withCreated(podEntry("e1", "p1", "/a"), 10)},
			wantInSync: []string{"csid-a"},
			wantDelete: []string{"e2"},
		},
		{
			name:       "changed SPIFFE ID of a pod rewrites its entry in place",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/b"), "csid-a", 0, "p1")},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a")},
			wantUpdate: []string{"e1"},
		},
		{
			name:       "entries of different pods are never paired",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p2", "/b"), "csid-a", 0, "p2")},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a")},
			wantCreate: []string{"/b"},
			wantDelete: []string{"e1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := reconcile(tc.declared, tc.current, unsupportedFields{})
			var created, updated, inSync, masked []string
			for _, d := range p.toCreate {
				created = append(created, d.Entry.GetSpiffeId().GetPath())
			}
			for _, u := range p.toUpdate {
				updated = append(updated, u.current.GetId())
			}
			inSync, masked = names(p.inSync), names(p.masked)
			slices.Sort(created)
			slices.Sort(updated)
			check := func(what string, got, want []string) {
				if !slices.Equal(got, want) {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			check("created", created, tc.wantCreate)
			check("updated", updated, tc.wantUpdate)
			check("deleted", ids(p.toDelete), tc.wantDelete)
			check("in sync", inSync, tc.wantInSync)
			check("masked", masked, tc.wantMasked)
		})
	}
}

func withCreated(e *spiretypes.Entry, at int64) *spiretypes.Entry {
	e.CreatedAt = at
	return e
}

func TestReconcileUpdateMaskCarriesOnlyOutdatedFields(t *testing.T) {
	desired := podEntry("", "p1", "/a", "x.example")
	desired.X509SvidTtl = 3600
	desired.FederatesWith = []string{"b.org", "a.org"}
	current := podEntry("e1", "p1", "/a", "x.example")
	current.FederatesWith = []string{"a.org", "b.org"}

	p := reconcile([]*render.DeclaredEntry{declare(desired, "csid", 0, "p1")}, []*spiretypes.Entry{current}, unsupportedFields{})
	if len(p.toUpdate) != 1 {
		t.Fatalf("updates = %d, want 1", len(p.toUpdate))
	}
	m := p.toUpdate[0].mask
	if !m.X509SvidTtl || m.FederatesWith || m.DnsNames || m.SpiffeId || m.Selectors {
		t.Errorf("mask = %v, want only x509SvidTtl (federatesWith order does not matter)", m)
	}
}

func TestReconcileDoesNotModifyInputs(t *testing.T) {
	current := []*spiretypes.Entry{withCreated(podEntry("e2", "p1", "/a"), 2), withCreated(podEntry("e1", "p1", "/a"), 1)}
	reconcile(nil, current, unsupportedFields{})
	if current[0].GetId() != "e2" || current[1].GetId() != "e1" {
		t.Errorf("reconcile reordered its input")
	}
}

func TestJoinTokenEntries(t *testing.T) {
	token := &spiretypes.Entry{
		SpiffeId:  sid("/my-agent"),
		ParentId:  sid("/spire/agent/join_token/abc"),
		Selectors: []*spiretypes.Selector{{Type: "spiffe_id", Value: "spiffe://example.org/spire/agent/join_token/abc"}},
	}
	if !isJoinTokenEntry(token) {
		t.Errorf("join token agent entry not recognised")
	}
	notToken := &spiretypes.Entry{SpiffeId: sid("/w"), ParentId: sid("/spire/agent/join_token/abc"),
		Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "ns:x"}}}
	if isJoinTokenEntry(notToken) {
		t.Errorf("workload entry under a join token agent taken for the agent's own entry")
	}
}

func TestOwnership(t *testing.T) {
	entry := func(id string) *spiretypes.Entry { return podEntry(id, "p", "/a") }
	token := &spiretypes.Entry{Id: "t", ParentId: sid("/spire/agent/join_token/x"),
		Selectors: []*spiretypes.Selector{{Type: "spiffe_id", Value: "spiffe://example.org/spire/agent/join_token/x"}}}
	empty, old := "", "old"
	for _, tc := range []struct {
		name             string
		o                ownership
		e                *spiretypes.Entry
		owns, deleteOnly bool
	}{
		{"no prefix owns everything", ownership{}, entry("6f1c-uuid"), true, false},
		{"no prefix never owns join tokens", ownership{}, token, false, false},
		{"prefix owns its own", ownership{prefix: "a"}, entry("a.123"), true, false},
		{"prefix ignores others", ownership{prefix: "a"}, entry("b.123"), false, false},
		{"prefix is followed by a dot", ownership{prefix: "a"}, entry("ab.123"), false, false},
		{"prefix ignores unprefixed", ownership{prefix: "a"}, entry("6f1c-uuid"), false, false},
		{"cleanup \"\" deletes unprefixed", ownership{prefix: "a", cleanup: &empty}, entry("6f1c-uuid"), false, true},
		{"cleanup \"\" spares other prefixes", ownership{prefix: "a", cleanup: &empty}, entry("b.123"), false, false},
		{"cleanup of a prefix", ownership{prefix: "a", cleanup: &old}, entry("old.1"), false, true},
		{"cleanup never deletes join tokens", ownership{prefix: "a", cleanup: &empty}, token, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.o.owns(tc.e); got != tc.owns {
				t.Errorf("owns = %v, want %v", got, tc.owns)
			}
			if got := tc.o.deleteOnly(tc.e); got != tc.deleteOnly {
				t.Errorf("deleteOnly = %v, want %v", got, tc.deleteOnly)
			}
		})
	}
	if id := (ownership{prefix: "a"}).newID(); !strings.HasPrefix(id, "a.") || len(id) < 10 {
		t.Errorf("newID = %q", id)
	}
	if id := (ownership{}).newID(); id != "" {
		t.Errorf("newID without prefix = %q, want SPIRE to choose", id)
	}
}

func TestOwnershipOfDisabledKinds(t *testing.T) {
	pod := podEntry("a.1", "p", "/a")
	static := &spiretypes.Entry{Id: "a.2", SpiffeId: sid("/db"), ParentId: sid("/spire/server"),
		Selectors: []*spiretypes.Selector{{Type: "unix", Value: "uid:1"}}}
	noPods := ownership{skipPodEntries: true}
	if noPods.owns(pod) || !noPods.owns(static) {
		t.Errorf("with ClusterSPIFFEIDs off, pod entries must be left alone and others owned")
	}
	noStatics := ownership{skipOtherEntries: true}
	if !noStatics.owns(pod) || noStatics.owns(static) {
		t.Errorf("with ClusterStaticEntries off, entries of no pod must be left alone and pod entries owned")
	}
}
