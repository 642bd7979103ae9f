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
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// interner shares among cached entries the parts many of them repeat: parent IDs (one per
// node), trust domains and selectors (a pod's UID selector is in the entry of every
// ClusterSPIFFEID that selects the pod; namespace and service account ones in many more).
// Shared parts are copies of the first entry's, and are never modified.
type interner struct {
	ids       map[spiffeIDKey]*spiretypes.SPIFFEID
	selectors map[selectorKey]*spiretypes.Selector
	strings   map[string]*string
}

type spiffeIDKey struct{ trustDomain, path string }

type selectorKey struct{ typ, value string }

func newInterner() *interner {
	return &interner{ids: map[spiffeIDKey]*spiretypes.SPIFFEID{}, selectors: map[selectorKey]*spiretypes.Selector{},
		strings: map[string]*string{}}
}

func (in *interner) spiffeID(id *spiretypes.SPIFFEID) *spiretypes.SPIFFEID {
	k := spiffeIDKey{id.GetTrustDomain(), id.GetPath()}
	if shared, ok := in.ids[k]; ok {
		return shared
	}
	// A copy: id belongs to the caller.
	shared := &spiretypes.SPIFFEID{TrustDomain: in.string(k.trustDomain), Path: k.path}
	in.ids[k] = shared
	return shared
}

func (in *interner) selector(s *spiretypes.Selector) *spiretypes.Selector {
	k := selectorKey{s.GetType(), s.GetValue()}
	if shared, ok := in.selectors[k]; ok {
		return shared
	}
	shared := &spiretypes.Selector{Type: in.string(k.typ), Value: k.value}
	in.selectors[k] = shared
	return shared
}

func (in *interner) string(s string) string {
	return *in.stringRef(s)
}

// stringRef returns a shared pointer to a string equal to s: 8 bytes where the string is 16.
func (in *interner) stringRef(s string) *string {
	if shared, ok := in.strings[s]; ok {
		return shared
	}
	shared := &s
	in.strings[s] = shared
	return shared
}
