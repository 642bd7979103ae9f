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

package spiretest

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// The validation below follows what SPIRE v1.13 checks on the admin API so
// that a controller that passes against the fake is not rejected by the
// real server; it is not a complete reimplementation.

const (
	maxHintLength    = 1024
	maxEntryIDLength = 255
)

var allEntryFields = &types.EntryMask{
	SpiffeId: true, ParentId: true, Selectors: true, X509SvidTtl: true,
	FederatesWith: true, Admin: true, Downstream: true, ExpiresAt: true,
	DnsNames: true, StoreSvid: true, JwtSvidTtl: true, Hint: true,
}

// checkEntry validates the fields of e selected by mask (nil: all) and
// returns its federates_with normalized to trust domain names.
func checkEntry(td spiffeid.TrustDomain, e *types.Entry, mask *types.EntryMask) ([]string, error) {
	if e == nil {
		return nil, errors.New("missing entry")
	}
	if mask == nil {
		mask = allEntryFields
	}
	if mask.ParentId {
		if _, err := memberID(td, e.ParentId); err != nil {
			return nil, fmt.Errorf("invalid parent ID: %w", err)
		}
	}
	if mask.SpiffeId {
		id, err := memberID(td, e.SpiffeId)
		if err != nil {
			return nil, fmt.Errorf("invalid spiffe ID: %w", err)
		}
		if p := id.Path(); p == "/spire" || strings.HasPrefix(p, "/spire/") {
			return nil, fmt.Errorf("invalid spiffe ID: %q is not a workload in trust domain %q; path is in the reserved namespace", id, td)
		}
	}
	if mask.DnsNames {
		for _, name := range e.DnsNames {
			if err := checkDNSName(name); err != nil {
				return nil, fmt.Errorf("invalid DNS name: %w", err)
			}
		}
	}
	var federatesWith []string
	if mask.FederatesWith {
		for _, name := range e.FederatesWith {
			ftd, err := spiffeid.TrustDomainFromString(name)
			if err != nil {
				return nil, fmt.Errorf("invalid federated trust domain: %w", err)
			}
			federatesWith = append(federatesWith, ftd.Name())
		}
	}
	if mask.Selectors {
		if len(e.Selectors) == 0 {
			return nil, errors.New("selector list is empty")
		}
		for _, sel := range e.Selectors {
			switch {
			case sel.GetType() == "":
				return nil, errors.New("missing selector type")
			case strings.Contains(sel.GetType(), ":"):
				return nil, errors.New("selector type contains ':'")
			case sel.GetValue() == "":
				return nil, errors.New("missing selector value")
			}
		}
	}
	if mask.Hint && len(e.Hint) > maxHintLength {
		return nil, fmt.Errorf("hint is too long, max length is %d characters", maxHintLength)
	}
	return federatesWith, nil
}

// checkStoredEntry is the datastore's own validation of a full entry.
func checkStoredEntry(e *types.Entry) error {
	if e.StoreSvid {
		for _, sel := range e.Selectors {
			if sel.GetType() != e.Selectors[0].GetType() {
				return errors.New("invalid registration entry: selector types must be the same when store SVID is enabled")
			}
		}
	}
	if len(e.Id) > maxEntryIDLength {
		return errors.New("invalid registration entry: entry ID too long")
	}
	for _, r := range e.Id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return errors.New("invalid registration entry: entry ID contains invalid characters")
		}
	}
	if e.X509SvidTtl < 0 {
		return errors.New("invalid registration entry: X509SvidTtl is not set")
	}
	if e.JwtSvidTtl < 0 {
		return errors.New("invalid registration entry: JwtSvidTtl is not set")
	}
	return nil
}

func memberID(td spiffeid.TrustDomain, p *types.SPIFFEID) (spiffeid.ID, error) {
	if p == nil {
		return spiffeid.ID{}, errors.New("request must specify SPIFFE ID")
	}
	idTD, err := spiffeid.TrustDomainFromString(p.TrustDomain)
	if err != nil {
		return spiffeid.ID{}, err
	}
	id, err := spiffeid.FromPath(idTD, p.Path)
	if err != nil {
		return spiffeid.ID{}, err
	}
	if !id.MemberOf(td) {
		return spiffeid.ID{}, fmt.Errorf("%q is not a member of trust domain %q", id, td)
	}
	if id.Path() == "" {
		return spiffeid.ID{}, fmt.Errorf("%q is not a member of trust domain %q; path is empty", id, td)
	}
	return id, nil
}

// checkDNSName accepts host names with an optional leading "*." wildcard.
func checkDNSName(name string) error {
	host, _ := strings.CutPrefix(name, "*.")
	if host == "" || len(host) > 253 {
		return fmt.Errorf("invalid length for %q", name)
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("invalid label in %q", name)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("invalid character %q in %q", r, name)
			}
		}
	}
	return nil
}

// similar reports whether two entries are duplicates in SPIRE's sense:
// same SPIFFE ID, same parent ID and the same selector set.
func similar(a, b *types.Entry) bool {
	return idString(a.SpiffeId) == idString(b.SpiffeId) &&
		idString(a.ParentId) == idString(b.ParentId) &&
		selectorSet(a.Selectors) == selectorSet(b.Selectors)
}

func idString(p *types.SPIFFEID) string {
	return "spiffe://" + p.GetTrustDomain() + p.GetPath()
}

func selectorSet(sels []*types.Selector) string {
	keys := make([]string, 0, len(sels))
	seen := map[string]bool{}
	for _, s := range sels {
		k := s.GetType() + ":" + s.GetValue()
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, "\x00")
}

// checkRelationship validates a federation relationship the way SPIRE's
// API layer does; like SPIRE it checks every field whatever the mask.
func checkRelationship(r *types.FederationRelationship) (spiffeid.TrustDomain, error) {
	if r == nil {
		return spiffeid.TrustDomain{}, errors.New("missing federation relationship")
	}
	td, err := spiffeid.TrustDomainFromString(r.TrustDomain)
	if err != nil {
		return spiffeid.TrustDomain{}, fmt.Errorf("failed to parse trust domain: %w", err)
	}
	u, err := url.Parse(r.BundleEndpointUrl)
	switch {
	case err != nil:
		return td, fmt.Errorf("failed to parse bundle endpoint URL: %w", err)
	case u.Scheme != "https":
		return td, errors.New("bundle endpoint URL must use the https scheme")
	case u.Host == "":
		return td, errors.New("bundle endpoint URL must specify the host")
	case u.User != nil:
		return td, errors.New("bundle endpoint URL must not contain user info")
	}
	switch p := r.BundleEndpointProfile.(type) {
	case *types.FederationRelationship_HttpsSpiffe:
		if p.HttpsSpiffe == nil {
			return td, errors.New("bundle endpoint profile does not contain \"HttpsSpiffe\"")
		}
		if _, err := spiffeid.FromString(p.HttpsSpiffe.EndpointSpiffeId); err != nil {
			return td, fmt.Errorf("failed to parse endpoint SPIFFE ID: %w", err)
		}
	case *types.FederationRelationship_HttpsWeb:
	default:
		return td, fmt.Errorf("unsupported bundle endpoint profile type: %T", r.BundleEndpointProfile)
	}
	if b := r.TrustDomainBundle; b != nil {
		btd, err := spiffeid.TrustDomainFromString(b.TrustDomain)
		if err != nil {
			return td, fmt.Errorf("failed to parse bundle: %w", err)
		}
		if btd != td {
			return td, fmt.Errorf("trust domain bundle (%q) must match the trust domain of the federation relationship (%q)", b.TrustDomain, td)
		}
	}
	return td, nil
}
