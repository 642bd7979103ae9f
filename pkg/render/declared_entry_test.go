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

package render

import (
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"
)

func sid(path string) *spiretypes.SPIFFEID {
	return &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: path}
}

func TestKeyIgnoresSelectorOrderAndIDs(t *testing.T) {
	a := &spiretypes.Entry{Id: "a", SpiffeId: sid("/w"), ParentId: sid("/n"), Selectors: []*spiretypes.Selector{
		{Type: "k8s", Value: "ns:x"}, {Type: "k8s", Value: "sa:y"}}}
	b := &spiretypes.Entry{Id: "b", SpiffeId: sid("/w"), ParentId: sid("/n"), Selectors: []*spiretypes.Selector{
		{Type: "k8s", Value: "sa:y"}, {Type: "k8s", Value: "ns:x"}}, DnsNames: []string{"other"}}
	if KeyOf(a) != KeyOf(b) {
		t.Errorf("same identity with reordered selectors must share a key")
	}
	for name, other := range map[string]*spiretypes.Entry{
		"spiffe ID": {SpiffeId: sid("/w2"), ParentId: sid("/n"), Selectors: a.Selectors},
		"parent ID": {SpiffeId: sid("/w"), ParentId: sid("/n2"), Selectors: a.Selectors},
		"selectors": {SpiffeId: sid("/w"), ParentId: sid("/n"), Selectors: a.Selectors[:1]},
		// Field boundaries must not be ambiguous.
		"shifted": {SpiffeId: sid("/w"), ParentId: sid("/n"), Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "ns:xk8s:sa:y"}}},
	} {
		if KeyOf(other) == KeyOf(a) {
			t.Errorf("entries differing in %s share a key", name)
		}
	}
}

// TestDeclarerCompare pins spire-controller-manager's preference among declarers of one entry:
// older first; then not being deleted before being deleted, and of two being deleted the later
// deletion first; then the lower UID, whatever the kinds and names.
func TestDeclarerCompare(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := func(name, uid string, created time.Time, deleted time.Time) Declarer {
		return Declarer{Kind: KindClusterSPIFFEID, Name: name, UID: types.UID(uid), Created: created, Deleted: deleted}
	}
	for _, tc := range []struct {
		name              string
		preferred, masked Declarer
	}{
		{"older first, even when being deleted", d("z", "9", t0, t0.Add(time.Hour)), d("a", "1", t0.Add(time.Second), time.Time{})},
		{"not being deleted before being deleted", d("z", "9", t0, time.Time{}), d("a", "1", t0, t0.Add(time.Minute))},
		{"later deletion first", d("z", "9", t0, t0.Add(2*time.Minute)), d("a", "1", t0, t0.Add(time.Minute))},
		{"lower UID, not name", d("z", "1", t0, time.Time{}), d("a", "2", t0, time.Time{})},
		{"lower UID across kinds", Declarer{Kind: KindClusterStaticEntry, Name: "s", UID: "1", Created: t0},
			Declarer{Kind: KindClusterSPIFFEID, Name: "c", UID: "2", Created: t0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.preferred.Compare(tc.masked); got >= 0 {
				t.Errorf("Compare(preferred, masked) = %d, want < 0", got)
			}
			if got := tc.masked.Compare(tc.preferred); got <= 0 {
				t.Errorf("Compare(masked, preferred) = %d, want > 0", got)
			}
		})
	}
}

// Keys are compared with keys computed by earlier builds' caches only within one process, but
// they must not drift by accident: these are the keys of the first implementation.
func TestKeyOfIsStable(t *testing.T) {
	id := func(td, p string) *spiretypes.SPIFFEID { return &spiretypes.SPIFFEID{TrustDomain: td, Path: p} }
	sel := func(t, v string) *spiretypes.Selector { return &spiretypes.Selector{Type: t, Value: v} }
	for _, tc := range []struct {
		entry *spiretypes.Entry
		want  Key
	}{
		{&spiretypes.Entry{SpiffeId: id("example.org", "/ns/shop/sa/web"), ParentId: id("example.org", "/spire/agent/k8s_psat/c/node-1"),
			Selectors: []*spiretypes.Selector{sel("k8s", "pod-uid:0d4b8f3e-7c1a-4e2b-9f6d-1a2b3c4d5e6f")}},
			"8a6f0cf2eb03370217151035434ca023e020387a7ce3de88d652638c4dc45d35"},
		{&spiretypes.Entry{SpiffeId: id("example.org", "/static"), ParentId: id("example.org", "/spire/server"),
			Selectors: []*spiretypes.Selector{sel("unix", "uid:0"), sel("k8s", "ns:a"), sel("k8sa", "x"), sel("k8s:", "y")}},
			"4ceb5abc7fcd5dadc04f19de72d0c51ba3ca7b69184bbba6a3ae42aa52e21f6c"},
		{&spiretypes.Entry{SpiffeId: id("example.org", "/nul\x00x"), Selectors: []*spiretypes.Selector{sel("a", "b\x00c"), sel("a", "b")}},
			"43ce372a23bf0aca22255e9fb504c11ad87bfd053dcccc2ce82eeee67deae47b"},
		{&spiretypes.Entry{}, "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"},
	} {
		if got := KeyOf(tc.entry); got != tc.want {
			t.Errorf("KeyOf(%v) = %s, want %s", tc.entry, got, tc.want)
		}
	}
}

func BenchmarkKeyOf(b *testing.B) {
	e := &spiretypes.Entry{
		SpiffeId:  &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/k3/ns/bench/pod/pod-012345"},
		ParentId:  &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/spire/agent/k8s_psat/bench/0d4b8f3e-7c1a-4e2b-9f6d-1a2b3c4d5e6f"},
		Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:6f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"}},
	}
	b.ReportAllocs()
	for b.Loop() {
		KeyOf(e)
	}
}
