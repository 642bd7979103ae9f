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

package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Entry is a registration entry as `spire-server entry show -output json`
// prints it, with SPIFFE IDs flattened to strings.
type Entry struct {
	ID             string
	SPIFFEID       string // spiffe://<trust domain><path>
	ParentID       string
	Selectors      []Selector
	X509SVIDTTL    int32
	JWTSVIDTTL     int32
	FederatesWith  []string
	Admin          bool
	Downstream     bool
	ExpiresAt      int64
	DNSNames       []string
	RevisionNumber int64
	StoreSVID      bool
	Hint           string
	CreatedAt      int64
}

// Selector is a type:value workload or node selector.
type Selector struct {
	Type  string
	Value string
}

// String returns the selector in the CLI's type:value form.
func (s Selector) String() string { return s.Type + ":" + s.Value }

// FederationRelationship is one relationship as `spire-server federation
// list -output json` prints it.
type FederationRelationship struct {
	TrustDomain       string
	BundleEndpointURL string
	// Profile is "https_web" or "https_spiffe".
	Profile string
	// EndpointSPIFFEID is set for the https_spiffe profile.
	EndpointSPIFFEID string
	// TrustDomainBundle is the bundle's JSON as printed, or nil if none.
	TrustDomainBundle json.RawMessage
}

// The JSON shapes below mirror the CLI output: protojson of the SPIRE API
// messages with proto field names, unpopulated fields emitted (null ones
// dropped) and 64-bit integers as strings.

type jsonSPIFFEID struct {
	TrustDomain string `json:"trust_domain"`
	Path        string `json:"path"`
}

func (id *jsonSPIFFEID) String() string {
	if id == nil || id.TrustDomain == "" {
		return ""
	}
	return "spiffe://" + id.TrustDomain + id.Path
}

// jsonInt64 accepts protojson's quoted 64-bit integers as well as bare numbers.
type jsonInt64 int64

func (n *jsonInt64) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	if err != nil {
		return fmt.Errorf("parse int64 %s: %w", b, err)
	}
	*n = jsonInt64(v)
	return nil
}

type jsonEntry struct {
	ID            string        `json:"id"`
	SPIFFEID      *jsonSPIFFEID `json:"spiffe_id"`
	ParentID      *jsonSPIFFEID `json:"parent_id"`
	Selectors     []Selector    `json:"selectors"`
	X509SVIDTTL   int32         `json:"x509_svid_ttl"`
	JWTSVIDTTL    int32         `json:"jwt_svid_ttl"`
	FederatesWith []string      `json:"federates_with"`
	Admin         bool          `json:"admin"`
	Downstream    bool          `json:"downstream"`
	ExpiresAt     jsonInt64     `json:"expires_at"`
	DNSNames      []string      `json:"dns_names"`
	RevisionNo    jsonInt64     `json:"revision_number"`
	StoreSVID     bool          `json:"store_svid"`
	Hint          string        `json:"hint"`
	CreatedAt     jsonInt64     `json:"created_at"`
}

func (e *jsonEntry) entry() Entry {
	return Entry{
		ID:             e.ID,
		SPIFFEID:       e.SPIFFEID.String(),
		ParentID:       e.ParentID.String(),
		Selectors:      e.Selectors,
		X509SVIDTTL:    e.X509SVIDTTL,
		JWTSVIDTTL:     e.JWTSVIDTTL,
		FederatesWith:  e.FederatesWith,
		Admin:          e.Admin,
		Downstream:     e.Downstream,
		ExpiresAt:      int64(e.ExpiresAt),
		DNSNames:       e.DNSNames,
		RevisionNumber: int64(e.RevisionNo),
		StoreSVID:      e.StoreSVID,
		Hint:           e.Hint,
		CreatedAt:      int64(e.CreatedAt),
	}
}

// The Selector JSON keys are "type" and "value"; encoding/json matches them
// case-insensitively to the exported fields.

// EntryShow lists every registration entry through the real CLI, as an
// independent oracle of what the server stores.
func (s *SPIRE) EntryShow(ctx context.Context) ([]Entry, error) {
	out, err := s.CLI(ctx, "entry show", "-output", "json")
	if err != nil {
		return nil, err
	}
	var resp struct {
		Entries []jsonEntry `json:"entries"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("decode entry show output %q: %w", out, err)
	}
	entries := make([]Entry, 0, len(resp.Entries))
	for i := range resp.Entries {
		entries = append(entries, resp.Entries[i].entry())
	}
	return entries, nil
}

// FederationShow lists every federation relationship through the real CLI.
func (s *SPIRE) FederationShow(ctx context.Context) ([]FederationRelationship, error) {
	out, err := s.CLI(ctx, "federation list", "-output", "json")
	if err != nil {
		return nil, err
	}
	var resp struct {
		Relationships []struct {
			TrustDomain       string          `json:"trust_domain"`
			BundleEndpointURL string          `json:"bundle_endpoint_url"`
			HTTPSWeb          json.RawMessage `json:"https_web"`
			HTTPSSPIFFE       *struct {
				EndpointSPIFFEID string `json:"endpoint_spiffe_id"`
			} `json:"https_spiffe"`
			TrustDomainBundle json.RawMessage `json:"trust_domain_bundle"`
		} `json:"federation_relationships"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("decode federation list output %q: %w", out, err)
	}
	rels := make([]FederationRelationship, 0, len(resp.Relationships))
	for _, r := range resp.Relationships {
		rel := FederationRelationship{
			TrustDomain:       r.TrustDomain,
			BundleEndpointURL: r.BundleEndpointURL,
			TrustDomainBundle: r.TrustDomainBundle,
		}
		switch {
		case r.HTTPSSPIFFE != nil:
			rel.Profile = "https_spiffe"
			rel.EndpointSPIFFEID = r.HTTPSSPIFFE.EndpointSPIFFEID
		case r.HTTPSWeb != nil:
			rel.Profile = "https_web"
		}
		rels = append(rels, rel)
	}
	return rels, nil
}

// EntrySpec describes an entry for CreateEntryCLI.
type EntrySpec struct {
	SPIFFEID  string
	ParentID  string
	Selectors []string // type:value
	// ExtraFlags are passed to `spire-server entry create` verbatim, e.g.
	// "-dns", "a.example", "-x509SVIDTTL", "60".
	ExtraFlags []string
}

// CreateEntryCLI creates an entry through the real CLI, e.g. to plant an
// entry the controller did not make, and returns it as the server stored it.
func (s *SPIRE) CreateEntryCLI(ctx context.Context, spec EntrySpec) (Entry, error) {
	flags := []string{"-output", "json", "-spiffeID", spec.SPIFFEID, "-parentID", spec.ParentID}
	for _, sel := range spec.Selectors {
		flags = append(flags, "-selector", sel)
	}
	flags = append(flags, spec.ExtraFlags...)
	out, err := s.CLI(ctx, "entry create", flags...)
	if err != nil {
		return Entry{}, err
	}
	var resp struct {
		Results []struct {
			Status struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"status"`
			Entry jsonEntry `json:"entry"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return Entry{}, fmt.Errorf("decode entry create output %q: %w", out, err)
	}
	if len(resp.Results) != 1 {
		return Entry{}, fmt.Errorf("entry create returned %d results: %s", len(resp.Results), out)
	}
	if r := resp.Results[0]; r.Status.Code != 0 {
		return Entry{}, fmt.Errorf("entry create failed with code %d: %s", r.Status.Code, r.Status.Message)
	}
	return resp.Results[0].Entry.entry(), nil
}

// DeleteEntryCLI deletes an entry by ID through the real CLI.
func (s *SPIRE) DeleteEntryCLI(ctx context.Context, id string) error {
	_, err := s.CLI(ctx, "entry delete", "-entryID", id)
	return err
}
