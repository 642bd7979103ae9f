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
	"maps"
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
	// toAdopt are declarations of relationships SPIRE holds whose bundle the controller has
	// no record of sending: their declared bundle is recorded as sent, without a write (see
	// sent_bundles.go).
	toAdopt []*declaration
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

// sendsBundle reports whether the update carries the declared bundle.
func (u *relationshipUpdate) sendsBundle() bool {
	return slices.Contains(u.outdated, fieldTrustDomainBundle)
}

// movesEndpoint reports whether the update changes where or how SPIRE fetches the bundle.
func (u *relationshipUpdate) movesEndpoint() bool {
	return slices.Contains(u.outdated, fieldBundleEndpointURL) || slices.Contains(u.outdated, fieldBundleEndpointProfile)
}

// lastSentFunc returns the declared bundle last sent for a trust domain, and whether there
// is a record of one.
type lastSentFunc func(trustDomain string) (*spiretypes.Bundle, bool)

// reconcile diffs declarations against SPIRE's relationships, both by trust domain. It is the
// one truth of both the per-key sync (one trust domain) and the full resync (all of them).
// lastSent tells whether a declared bundle changed since it was sent.
func reconcile(decls map[string]*declaration, current map[string]*spiretypes.FederationRelationship, lastSent lastSentFunc) plan {
	var p plan
	for _, td := range slices.Sorted(maps.Keys(decls)) {
		d := decls[td]
		cur := current[td]
		switch {
		case d.relationship == nil:
			p.invalid++
		case cur == nil:
			p.toCreate = append(p.toCreate, d)
		default:
			sent, known := lastSent(td)
			if !known {
				p.toAdopt = append(p.toAdopt, d)
			}
			bundleChanged := known && d.relationship.GetTrustDomainBundle() != nil && !bundleEqual(sent, d.relationship.GetTrustDomainBundle())
			if fields := outdated(cur, d.relationship, bundleChanged); len(fields) > 0 {
				p.toUpdate = append(p.toUpdate, &relationshipUpdate{declaration: d, outdated: fields})
			} else {
				p.inSync++
			}
		}
	}
	for _, td := range slices.Sorted(maps.Keys(current)) {
		if decls[td] == nil {
			p.toDelete = append(p.toDelete, td)
		}
	}
	return p
}

// outdated returns the fields of the relationship SPIRE holds that differ from the desired
// one. The bundle SPIRE holds is never compared: it is typically one SPIRE fetched from the
// bundle endpoint itself, newer than the resource's bootstrap copy. The bundle is outdated
// only when the resource's own bundle changed since it was sent (see sent_bundles.go).
func outdated(current, desired *spiretypes.FederationRelationship, bundleChanged bool) []string {
	var fields []string
	if current.GetBundleEndpointUrl() != desired.GetBundleEndpointUrl() {
		fields = append(fields, fieldBundleEndpointURL)
	}
	if !profileEqual(current, desired) {
		fields = append(fields, fieldBundleEndpointProfile)
	}
	if bundleChanged {
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

// updateMask selects the endpoint's URL and profile, which SPIRE validates together whatever
// the mask, and the bundle only when the update sends it, so that otherwise SPIRE keeps the
// bundle it holds.
func updateMask(sendsBundle bool) *spiretypes.FederationRelationshipMask {
	return &spiretypes.FederationRelationshipMask{
		BundleEndpointUrl:     true,
		BundleEndpointProfile: true,
		TrustDomainBundle:     sendsBundle,
	}
}
