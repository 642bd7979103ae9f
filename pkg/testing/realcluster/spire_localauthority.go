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
	"crypto/x509"
	"encoding/json"
	"fmt"
)

// The actions of `spire-server localauthority x509`, the rotation of the
// server's X.509 CA: prepare a new authority (it joins the bundle), activate
// it (the active one becomes old), taint the old one (the bundle marks it, and
// agents and downstream servers stop trusting what it signed), and revoke the
// tainted one (it leaves the bundle).
const (
	LocalAuthorityPrepare  = "prepare"
	LocalAuthorityActivate = "activate"
	LocalAuthorityTaint    = "taint"
	LocalAuthorityRevoke   = "revoke"
)

// LocalAuthority is one X.509 authority of the server as the localauthority
// commands print it.
type LocalAuthority struct {
	// ID is the authority's subject key ID, in lower-case hex.
	ID string
	// ExpiresAt is when its CA certificate expires, in Unix seconds.
	ExpiresAt int64
	// UpstreamAuthoritySubjectKeyID is set when an upstream authority signed it.
	UpstreamAuthoritySubjectKeyID string
}

// LocalX509Authorities is what `spire-server localauthority x509 show` prints:
// the authorities in each slot, nil where a slot is empty.
type LocalX509Authorities struct {
	Active, Prepared, Old *LocalAuthority
}

// BundleX509Authority is one X.509 authority of the server's own trust
// bundle, as `spire-server bundle show -output json` prints it.
type BundleX509Authority struct {
	Certificate *x509.Certificate
	Tainted     bool
}

type jsonLocalAuthority struct {
	AuthorityID                   string    `json:"authority_id"`
	ExpiresAt                     jsonInt64 `json:"expires_at"`
	UpstreamAuthoritySubjectKeyID string    `json:"upstream_authority_subject_key_id"`
}

func (a *jsonLocalAuthority) authority() *LocalAuthority {
	if a == nil || a.AuthorityID == "" {
		return nil
	}
	return &LocalAuthority{ID: a.AuthorityID, ExpiresAt: int64(a.ExpiresAt), UpstreamAuthoritySubjectKeyID: a.UpstreamAuthoritySubjectKeyID}
}

// LocalAuthorityX509Show lists the server's X.509 authorities through the real
// CLI (`spire-server localauthority x509 show`).
func (s *SPIRE) LocalAuthorityX509Show(ctx context.Context) (LocalX509Authorities, error) {
	out, err := s.CLI(ctx, "localauthority x509 show", "-output", "json")
	if err != nil {
		return LocalX509Authorities{}, err
	}
	var resp struct {
		Active   *jsonLocalAuthority `json:"active"`
		Prepared *jsonLocalAuthority `json:"prepared"`
		Old      *jsonLocalAuthority `json:"old"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return LocalX509Authorities{}, fmt.Errorf("decode localauthority x509 show output %q: %w", out, err)
	}
	return LocalX509Authorities{Active: resp.Active.authority(), Prepared: resp.Prepared.authority(), Old: resp.Old.authority()}, nil
}

// LocalAuthorityX509 runs `spire-server localauthority x509 <action>` through
// the real CLI and returns the authority it acted on. action is one of the
// LocalAuthority constants; authorityID names the authority for activate,
// taint and revoke and must be empty for prepare, which makes a new one.
func (s *SPIRE) LocalAuthorityX509(ctx context.Context, action, authorityID string) (LocalAuthority, error) {
	// Each action prints its authority under a key of its own.
	key := map[string]string{
		LocalAuthorityPrepare:  "prepared_authority",
		LocalAuthorityActivate: "activated_authority",
		LocalAuthorityTaint:    "tainted_authority",
		LocalAuthorityRevoke:   "revoked_authority",
	}[action]
	if key == "" {
		return LocalAuthority{}, fmt.Errorf("unknown localauthority x509 action %q", action)
	}
	if (action == LocalAuthorityPrepare) != (authorityID == "") {
		return LocalAuthority{}, fmt.Errorf("localauthority x509 %s: an authority ID is needed by activate, taint and revoke, and by nothing else", action)
	}
	flags := []string{"-output", "json"}
	if authorityID != "" {
		flags = append(flags, "-authorityID", authorityID)
	}
	out, err := s.CLI(ctx, "localauthority x509 "+action, flags...)
	if err != nil {
		return LocalAuthority{}, err
	}
	var resp map[string]*jsonLocalAuthority
	if err := json.Unmarshal(out, &resp); err != nil {
		return LocalAuthority{}, fmt.Errorf("decode localauthority x509 %s output %q: %w", action, out, err)
	}
	a := resp[key].authority()
	if a == nil {
		return LocalAuthority{}, fmt.Errorf("localauthority x509 %s printed no %s: %s", action, key, out)
	}
	return *a, nil
}

// BundleX509Authorities lists the X.509 authorities of the server's own
// bundle through the real CLI, with their taint marks.
func (s *SPIRE) BundleX509Authorities(ctx context.Context) ([]BundleX509Authority, error) {
	out, err := s.CLI(ctx, "bundle show", "-output", "json")
	if err != nil {
		return nil, err
	}
	var resp struct {
		X509Authorities []struct {
			// protojson prints bytes as standard base64, which encoding/json decodes into []byte.
			ASN1    []byte `json:"asn1"`
			Tainted bool   `json:"tainted"`
		} `json:"x509_authorities"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("decode bundle show output %q: %w", out, err)
	}
	auths := make([]BundleX509Authority, 0, len(resp.X509Authorities))
	for i, a := range resp.X509Authorities {
		cert, err := x509.ParseCertificate(a.ASN1)
		if err != nil {
			return nil, fmt.Errorf("parse bundle X.509 authority %d: %w", i, err)
		}
		auths = append(auths, BundleX509Authority{Certificate: cert, Tainted: a.Tainted})
	}
	return auths, nil
}
