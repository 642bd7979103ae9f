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

package federation

import (
	"slices"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// Field names used in logs for what differs between SPIRE and a declaration.
const (
	fieldBundleEndpointURL     = "bundleEndpointURL"
	fieldBundleEndpointProfile = "bundleEndpointProfile"
	fieldTrustDomainBundle     = "trustDomainBundle"
)

// plan is what to write to make SPIRE's relationships equal to the declarations.
type plan struct {
	toCreate []*declaration
	toUpdate []*relationshipUpdate
	// toDelete holds the trust domains of relationships no resource declares.
	toDelete []string
	// inSync counts declarations SPIRE already matches; invalid counts those left alone
	// because their spec is invalid.
	inSync, invalid int
}

// trustDomains returns every trust domain the plan writes.
func (p plan) trustDomains() []string {
	tds := slices.Clone(p.toDelete)
	for _, d := range p.toCreate {
		tds = append(tds, d.trustDomain)
	}
	for _, u := range p.toUpdate {
		tds = append(tds, u.trustDomain)
	}
	return tds
}

// relationshipUpdate is a declaration SPIRE holds with outdated fields.
type relationshipUpdate struct {
	*declaration
	outdated []string
}

// reconcile diffs declarations against SPIRE's relationships, both by trust domain. It is the
// one truth of both the per-key sync (one trust domain) and the full resync (all of them).
func reconcile(decls map[string]*declaration, current map[string]*spiretypes.FederationRelationship) plan {
	var p plan
	for _, td := range sortedKeys(decls) {
		d := decls[td]
		cur := current[td]
		switch {
		case d.relationship == nil:
			p.invalid++
		case cur == nil:
			p.toCreate = append(p.toCreate, d)
		default:
			if fields := outdated(cur, d.relationship); len(fields) > 0 {
				p.toUpdate = append(p.toUpdate, &relationshipUpdate{declaration: d, outdated: fields})
			} else {
				p.inSync++
			}
		}
	}
	for _, td := range sortedKeys(current) {
		if decls[td] == nil {
			p.toDelete = append(p.toDelete, td)
		}
	}
	return p
}

// outdated returns the fields of the relationship SPIRE holds that differ from the desired
// one. The bundle is compared only when one is declared: SPIRE lists whatever bundle it holds
// for the trust domain, typically one it fetched from the bundle endpoint itself, and that is
// not a difference from a resource that declares none.
func outdated(current, desired *spiretypes.FederationRelationship) []string {
	var fields []string
	if current.GetBundleEndpointUrl() != desired.GetBundleEndpointUrl() {
		fields = append(fields, fieldBundleEndpointURL)
	}
	if !profileEqual(current, desired) {
		fields = append(fields, fieldBundleEndpointProfile)
	}
	if desired.GetTrustDomainBundle() != nil && !bundleEqual(current.GetTrustDomainBundle(), desired.GetTrustDomainBundle()) {
		fields = append(fields, fieldTrustDomainBundle)
	}
	return fields
}

// profileEqual compares profiles by kind and endpoint SPIFFE ID; SPIRE echoes https_web as
// an empty oneof wrapper, which carries nothing to compare.
func profileEqual(a, b *spiretypes.FederationRelationship) bool {
	switch pa := a.GetBundleEndpointProfile().(type) {
	case *spiretypes.FederationRelationship_HttpsWeb:
		_, ok := b.GetBundleEndpointProfile().(*spiretypes.FederationRelationship_HttpsWeb)
		return ok
	case *spiretypes.FederationRelationship_HttpsSpiffe:
		pb, ok := b.GetBundleEndpointProfile().(*spiretypes.FederationRelationship_HttpsSpiffe)
		return ok && pa.HttpsSpiffe.GetEndpointSpiffeId() == pb.HttpsSpiffe.GetEndpointSpiffeId()
	default:
		return false
	}
}

// updateMask selects every field of the relationship: SPIRE validates every field whatever
// the mask, so the full relationship is sent anyway, and writing all of it leaves nothing
// stale. The bundle is left out when none is declared, so SPIRE keeps the one it holds.
func updateMask(desired *spiretypes.FederationRelationship) *spiretypes.FederationRelationshipMask {
	return &spiretypes.FederationRelationshipMask{
		BundleEndpointUrl:     true,
		BundleEndpointProfile: true,
		TrustDomainBundle:     desired.GetTrustDomainBundle() != nil,
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
