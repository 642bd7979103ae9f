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

package reconciler

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
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
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "spiffeid-a", 0, "p1")},
			wantCreate: []string{"/a"},
		},
		{
			name:       "equal entry is left alone",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a", "x.example"), "spiffeid-a", 0, "p1")},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a", "x.example")},
			wantInSync: []string{"spiffeid-a"},
		},
		{
			name:       "outdated field is updated in place",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a", "x.example", "y.example"), "spiffeid-a", 0, "p1")},
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
			name:       "equal ages fall back to name order without UIDs",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "b", 0, "p1"), declare(podEntry("", "p1", "/a"), "a", 0, "p1")},
			wantCreate: []string{"/a"},
			wantMasked: []string{"b"},
		},
		{
			// spire-controller-manager's tie-break: creation times have one-second resolution.
			name: "equal ages: lower UID wins, not name",
			declared: []*render.DeclaredEntry{withDeclarer(declare(podEntry("", "p1", "/a"), "a", 0, "p1"), "uid-2", time.Time{}),
				withDeclarer(declare(podEntry("", "p1", "/a"), "b", 0, "p1"), "uid-1", time.Time{})},
			wantCreate: []string{"/a"},
			wantMasked: []string{"a"},
		},
		{
			name: "equal ages: not being deleted wins over a lower UID being deleted",
			declared: []*render.DeclaredEntry{withDeclarer(declare(podEntry("", "p1", "/a"), "a", 0, "p1"), "uid-1", t0),
				withDeclarer(declare(podEntry("", "p1", "/a"), "b", 0, "p1"), "uid-2", time.Time{})},
			wantCreate: []string{"/a"},
			wantMasked: []string{"a"},
		},
		{
			name: "an older declarer being deleted still wins",
			declared: []*render.DeclaredEntry{withDeclarer(declare(podEntry("", "p1", "/a"), "old", time.Hour, "p1"), "uid-2", t0),
				withDeclarer(declare(podEntry("", "p1", "/a"), "young", 0, "p1"), "uid-1", time.Time{})},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a")},
			wantInSync: []string{"old"},
			wantMasked: []string{"young"},
		},
		{
			// spire-controller-manager compares DNS names as sets: an order it did not write
			// must not cause an update.
			name:       "DNS names in another order are in sync",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a", "web", "web.ns", "web.ns.svc"), "spiffeid-a", 0, "p1")},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a", "web.ns.svc", "web", "web.ns")},
			wantInSync: []string{"spiffeid-a"},
		},
		{
			name:       "duplicates in SPIRE: the oldest is kept",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/a"), "spiffeid-a", 0, "p1")},
			current:    []*spiretypes.Entry{withCreated(podEntry("e2", "p1", "/a"), 20), withCreated(podEntry("e1", "p1", "/a"), 10)},
			wantInSync: []string{"spiffeid-a"},
			wantDelete: []string{"e2"},
		},
		{
			name:       "changed SPIFFE ID of a pod rewrites its entry in place",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p1", "/b"), "spiffeid-a", 0, "p1")},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a")},
			wantUpdate: []string{"e1"},
		},
		{
			name:       "entries of different pods are never paired",
			declared:   []*render.DeclaredEntry{declare(podEntry("", "p2", "/b"), "spiffeid-a", 0, "p2")},
			current:    []*spiretypes.Entry{podEntry("e1", "p1", "/a")},
			wantCreate: []string{"/b"},
			wantDelete: []string{"e1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := reconcile(tc.declared, tc.current, unsupportedFields{})
			type summary struct{ Created, Updated, Deleted, InSync, Masked []string }
			var got summary
			for _, d := range p.ToCreate {
				got.Created = append(got.Created, d.Entry.GetSpiffeId().GetPath())
			}
			for _, u := range p.ToUpdate {
				got.Updated = append(got.Updated, u.Current.GetId())
			}
			slices.Sort(got.Created)
			slices.Sort(got.Updated)
			got.Deleted, got.InSync, got.Masked = ids(p.ToDelete), names(p.InSync), names(p.Masked)
			want := summary{Created: tc.wantCreate, Updated: tc.wantUpdate, Deleted: tc.wantDelete, InSync: tc.wantInSync, Masked: tc.wantMasked}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func withDeclarer(d *render.DeclaredEntry, uid types.UID, deleted time.Time) *render.DeclaredEntry {
	d.Declarer.UID, d.Declarer.Deleted = uid, deleted
	return d
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

	p := reconcile([]*render.DeclaredEntry{declare(desired, "spiffeid", 0, "p1")}, []*spiretypes.Entry{current}, unsupportedFields{})
	if len(p.ToUpdate) != 1 {
		t.Fatalf("updates = %d, want 1", len(p.ToUpdate))
	}
	// federatesWith order does not matter to SPIRE, so only the TTL is outdated.
	if diff := cmp.Diff(&spiretypes.EntryMask{X509SvidTtl: true}, p.ToUpdate[0].Mask, protocmp.Transform()); diff != "" {
		t.Errorf("mask mismatch (-want +got):\n%s", diff)
	}
}

// TestReconcileReplacementMaskNamesOnlyChangedFields: rewriting a pod's entry into another
// identity names only the fields that change, so SPIRE keeps what the controller does not
// manage (additional_attributes since SPIRE 1.15).
func TestReconcileReplacementMaskNamesOnlyChangedFields(t *testing.T) {
	desired := podEntry("", "p1", "/b", "x.example")
	current := podEntry("e1", "p1", "/a", "x.example")
	p := reconcile([]*render.DeclaredEntry{declare(desired, "spiffeid", 0, "p1")}, []*spiretypes.Entry{current}, unsupportedFields{})
	if len(p.ToUpdate) != 1 {
		t.Fatalf("updates = %d, want 1", len(p.ToUpdate))
	}
	if diff := cmp.Diff(&spiretypes.EntryMask{SpiffeId: true}, p.ToUpdate[0].Mask, protocmp.Transform()); diff != "" {
		t.Errorf("mask mismatch (-want +got):\n%s", diff)
	}
}

// TestReconcileDoesNotModifyInputs: declared and current entries are shared with the render
// and the entry cache, so reconcile must change neither the slices nor the entries, whichever
// branches it takes (masking, duplicates, in-place updates, paired replacements).
func TestReconcileDoesNotModifyInputs(t *testing.T) {
	current := []*spiretypes.Entry{
		withCreated(podEntry("e2", "p1", "/a"), 2), withCreated(podEntry("e1", "p1", "/a"), 1),
		podEntry("e3", "p2", "/old"), podEntry("e4", "p3", "/c", "x.example"), podEntry("e5", "gone", "/z"),
	}
	declared := []*render.DeclaredEntry{
		declare(podEntry("", "p1", "/a"), "young", time.Hour, "p1"),
		declare(podEntry("", "p1", "/a"), "old", 2*time.Hour, "p1"),
		declare(podEntry("", "p2", "/new"), "moved", 0, "p2"),
		declare(podEntry("", "p3", "/c", "y.example"), "dns", 0, "p3"),
		declare(podEntry("", "p4", "/d"), "fresh", 0, "p4"),
	}
	currentBefore := slices.Clone(current)
	declaredBefore := slices.Clone(declared)
	currentCopy := make([]*spiretypes.Entry, len(current))
	for i, e := range current {
		currentCopy[i] = proto.Clone(e).(*spiretypes.Entry)
	}
	declaredCopy := make([]render.DeclaredEntry, len(declared))
	for i, d := range declared {
		declaredCopy[i] = *d
		declaredCopy[i].Entry = proto.Clone(d.Entry).(*spiretypes.Entry)
	}

	p := reconcile(declared, current, unsupportedFields{})
	if len(p.ToCreate)+len(p.ToUpdate)+len(p.ToDelete)+len(p.Masked) < 4 {
		t.Fatalf("plan %+v does not take the branches this test is about", p)
	}

	if !slices.Equal(current, currentBefore) || !slices.Equal(declared, declaredBefore) {
		t.Errorf("reconcile reordered or replaced the elements of its input slices")
	}
	if diff := cmp.Diff(currentCopy, current, protocmp.Transform()); diff != "" {
		t.Errorf("reconcile modified current entries (-before +after):\n%s", diff)
	}
	for i, d := range declared {
		if diff := cmp.Diff(declaredCopy[i], *d, protocmp.Transform()); diff != "" {
			t.Errorf("reconcile modified declared entry %d (-before +after):\n%s", i, diff)
		}
	}
}

// TestPlanOutcomes checks what becomes of each declared entry of a plan: set when it is in
// sync or written, failed when its write failed, masked when an older declarer wins.
func TestPlanOutcomes(t *testing.T) {
	current := []*spiretypes.Entry{podEntry("e1", "p1", "/a"), podEntry("e2", "p2", "/b")}
	declared := []*render.DeclaredEntry{
		declare(podEntry("", "p1", "/a"), "insync", time.Hour, "p1"),
		declare(podEntry("", "p1", "/a"), "masked", 0, "p1"),
		declare(podEntry("", "p2", "/b", "x.example"), "updated", 0, "p2"),
		declare(podEntry("", "p3", "/c"), "created", 0, "p3"),
		declare(podEntry("", "p4", "/d"), "failed", 0, "p4"),
	}
	p := reconcile(declared, current, unsupportedFields{})
	failures := map[render.Key]error{declared[4].Key: errors.New("refused")}
	got := map[string]Outcome{}
	for d, o := range p.Outcomes(failures) {
		got[d.Declarer.Name] = o
	}
	want := map[string]Outcome{"insync": OutcomeSet, "masked": OutcomeMasked, "updated": OutcomeSet, "created": OutcomeSet, "failed": OutcomeEntryFailure}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}
