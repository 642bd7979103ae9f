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
// Shared parts are never modified, as no cached entry is.
type interner struct {
	ids       map[spiffeIDKey]*spiretypes.SPIFFEID
	selectors map[selectorKey]*spiretypes.Selector
	strings   map[string]string
}

type spiffeIDKey struct{ trustDomain, path string }

type selectorKey struct{ typ, value string }

func newInterner() *interner {
	return &interner{ids: map[spiffeIDKey]*spiretypes.SPIFFEID{}, selectors: map[selectorKey]*spiretypes.Selector{},
		strings: map[string]string{}}
}

// entry replaces the repeated parts of e, which the caller hands over, by shared ones.
func (in *interner) entry(e *spiretypes.Entry) {
	if p := e.GetParentId(); p != nil {
		e.ParentId = in.spiffeID(p)
	}
	if s := e.GetSpiffeId(); s != nil {
		s.TrustDomain = in.string(s.TrustDomain)
	}
	for i, s := range e.GetSelectors() {
		e.Selectors[i] = in.selector(s)
	}
}

func (in *interner) spiffeID(id *spiretypes.SPIFFEID) *spiretypes.SPIFFEID {
	k := spiffeIDKey{id.GetTrustDomain(), id.GetPath()}
	if shared, ok := in.ids[k]; ok {
		return shared
	}
	id.TrustDomain = in.string(id.TrustDomain)
	in.ids[k] = id
	return id
}

func (in *interner) selector(s *spiretypes.Selector) *spiretypes.Selector {
	k := selectorKey{s.GetType(), s.GetValue()}
	if shared, ok := in.selectors[k]; ok {
		return shared
	}
	s.Type = in.string(s.Type)
	in.selectors[k] = s
	return s
}

func (in *interner) string(s string) string {
	if shared, ok := in.strings[s]; ok {
		return shared
	}
	in.strings[s] = s
	return s
}
