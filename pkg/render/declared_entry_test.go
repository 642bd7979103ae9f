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

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
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
