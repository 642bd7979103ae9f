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
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// fullEntry sets every field of an Entry.
func fullEntry() *spiretypes.Entry {
	return &spiretypes.Entry{
		Id:             "id-1",
		SpiffeId:       &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/ns/a/sa/b"},
		ParentId:       &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/spire/agent/k8s_psat/c/node-1"},
		Selectors:      []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:1"}, {Type: "k8s", Value: "ns:a"}},
		X509SvidTtl:    3600,
		FederatesWith:  []string{"other.org"},
		Admin:          true,
		Downstream:     true,
		ExpiresAt:      1700000000,
		DnsNames:       []string{"a.example"},
		RevisionNumber: 7,
		StoreSvid:      true,
		JwtSvidTtl:     300,
		Hint:           "hint",
		CreatedAt:      1600000000,
		AdditionalAttributes: &spiretypes.Entry_AdditionalAttributes{
			DisableX509SvidPrefetch: true, JwtSvidIncludeJti: true,
		},
	}
}

// TestCachedEntryKeepsEveryField: what the cache hands out equals what it was given, for
// every field of Entry. The sample sets them all, so a field a newer SDK adds to Entry fails
// this test until the cache keeps it.
func TestCachedEntryKeepsEveryField(t *testing.T) {
	full := fullEntry()
	m := full.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		if !m.Has(fields.Get(i)) {
			t.Fatalf("the sample entry leaves %s unset", fields.Get(i).Name())
		}
	}
	cases := map[string]*spiretypes.Entry{
		"every field":     full,
		"pod entry":       {Id: "id-2", SpiffeId: full.SpiffeId, ParentId: full.ParentId, Selectors: full.Selectors[:1], RevisionNumber: 1},
		"no SPIFFE ID":    {Id: "id-3"},
		"empty SPIFFE ID": {Id: "id-4", SpiffeId: &spiretypes.SPIFFEID{}},
		"additional attributes only": {Id: "id-5", SpiffeId: full.SpiffeId,
			AdditionalAttributes: &spiretypes.Entry_AdditionalAttributes{}},
	}
	for name, e := range cases {
		t.Run(name, func(t *testing.T) {
			before := proto.CloneOf(e)
			got := compactEntry(e, newInterner()).entry()
			if diff := cmp.Diff(e, got, protocmp.Transform()); diff != "" {
				t.Errorf("cached entry (-given +handed out):\n%s", diff)
			}
			if diff := cmp.Diff(before, e, protocmp.Transform()); diff != "" {
				t.Errorf("compacting modified the given entry (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCachedEntriesShareRepeatedParts: entries of one interner share their parent ID and
// selectors, and a handed-out entry has a SPIFFE ID of its own.
func TestCachedEntriesShareRepeatedParts(t *testing.T) {
	in := newInterner()
	a, b := fullEntry(), fullEntry()
	b.Id = "id-2"
	ca, cb := compactEntry(a, in), compactEntry(b, in)
	if ca.parent != cb.parent || ca.selectors[0] != cb.selectors[0] {
		t.Error("two entries with the same parent ID and selectors do not share them")
	}
	if ca.parent == a.ParentId || ca.selectors[0] == a.Selectors[0] {
		t.Error("the cache keeps parts of the entry it was given")
	}
	if ea, eb := ca.entry(), ca.entry(); ea.SpiffeId == eb.SpiffeId {
		t.Error("two handed-out copies share one SPIFFE ID message")
	}
}

// TestCachedEntrySize: the struct the cache keeps per entry stays in the 112-byte size class.
func TestCachedEntrySize(t *testing.T) {
	if size := unsafe.Sizeof(cachedEntry{}); size > 112 {
		t.Errorf("cachedEntry takes %d bytes, want at most 112", size)
	}
}
