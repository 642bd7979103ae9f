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
	"strings"
	"testing"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

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
	noPods := ownership{skipClusterSPIFFEIDs: true}
	if noPods.owns(pod) || !noPods.owns(static) {
		t.Errorf("with ClusterSPIFFEIDs off, pod entries must be left alone and others owned")
	}
	noStatics := ownership{skipClusterStaticEntries: true}
	if !noStatics.owns(pod) || noStatics.owns(static) {
		t.Errorf("with ClusterStaticEntries off, entries of no pod must be left alone and pod entries owned")
	}
}
