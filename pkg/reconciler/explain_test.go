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

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// TestOwns checks that explain's wrapper applies the entry ID prefix and never owns join-token
// agent entries.
func TestOwns(t *testing.T) {
	pod := func(id string) *spiretypes.Entry {
		return &spiretypes.Entry{Id: id, Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:u"}}}
	}
	joinToken := &spiretypes.Entry{Id: "jt", ParentId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/spire/agent/join_token/t"},
		Selectors: []*spiretypes.Selector{{Type: "spiffe_id", Value: "spiffe://example.org/spire/agent/join_token/t"}}}
	cases := []struct {
		name  string
		opts  Options
		entry *spiretypes.Entry
		want  bool
	}{
		{name: "no prefix owns all", entry: pod("any"), want: true},
		{name: "own prefix", opts: Options{EntryIDPrefix: "mine"}, entry: pod("mine.1"), want: true},
		{name: "other prefix", opts: Options{EntryIDPrefix: "mine"}, entry: pod("theirs.1")},
		{name: "pod entries skipped", opts: Options{SkipClusterSPIFFEIDs: true}, entry: pod("any")},
		{name: "join token agent", entry: joinToken},
	}
	for _, tc := range cases {
		if got := Owns(tc.opts, tc.entry); got != tc.want {
			t.Errorf("%s: Owns = %v, want %v", tc.name, got, tc.want)
		}
	}
}
