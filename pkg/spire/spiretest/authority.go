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
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"
	"time"
)

const (
	// DefaultCATTL is the lifetime of the downstream CAs the fake signs
	// when the caller states no preferred TTL, as SPIRE's ca_ttl default.
	DefaultCATTL = 24 * time.Hour

	// rootTTL is the lifetime of the fake's self-signed roots: long enough
	// that no downstream CA a test asks for is cut short by it.
	rootTTL = 30 * 24 * time.Hour

	// notBeforeCushion backdates what the fake signs, as SPIRE's
	// credtemplate.NotBeforeCushion does, for peers whose clocks lag.
	notBeforeCushion = 10 * time.Second
)

// authority is one self-signed X.509 root of the fake's trust domain.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	// tainted marks a root SPIRE is rotating SVIDs away from (see TaintX509Authority).
	tainted bool
}

// SetCATTL sets the lifetime of the downstream CAs the fake signs when
// the caller states no preferred TTL; ttl <= 0 restores DefaultCATTL. A
// preferred TTL is honoured, as SPIRE does; either is cut at the root's
// expiry.
func (s *Server) SetCATTL(ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ttl <= 0 {
		ttl = DefaultCATTL
	}
	s.caTTL = ttl
}

// RotateX509Authority makes a new self-signed root the one that signs
// from now on. The old roots stay in the bundle, as SPIRE keeps them
// until they expire, so what they signed still verifies.
func (s *Server) RotateX509Authority() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.activeRoot(); err != nil { // the root being rotated out
		s.t.Fatalf("spiretest: %v", err)
	}
	root, err := s.newRoot()
	if err != nil {
		s.t.Fatalf("spiretest: %v", err)
	}
	s.roots = append(s.roots, root)
}

// TaintX509Authority marks the root cert as tainted in the bundle GetBundle serves, as
// `spire-server localauthority x509 taint` does: the root stays trusted, but what it signed
// is to be replaced. As in SPIRE, only a root that no longer signs can be tainted; tainting
// the active one, or a certificate that is not a root of the fake's, fails the test.
func (s *Server) TaintX509Authority(cert *x509.Certificate) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.roots {
		if !r.cert.Equal(cert) {
			continue
		}
		if i == len(s.roots)-1 {
			s.t.Fatalf("spiretest: unable to taint the active X.509 authority; rotate first")
		}
		r.tainted = true
		return
	}
	s.t.Fatalf("spiretest: no X.509 authority %q to taint", cert.Subject)
}

// X509Authorities returns the roots of the fake's trust domain, oldest
// first; the last one signs. The first call creates the first root.
func (s *Server) X509Authorities() []*x509.Certificate {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.activeRoot(); err != nil {
		s.t.Fatalf("spiretest: %v", err)
	}
	out := make([]*x509.Certificate, len(s.roots))
	for i, r := range s.roots {
		out[i] = r.cert
	}
	return out
}

// activeRoot returns the root that signs, creating the first one for the
// current trust domain on first use. s.mu must be held.
func (s *Server) activeRoot() (*authority, error) {
	if len(s.roots) == 0 {
		root, err := s.newRoot()
		if err != nil {
			return nil, err
		}
		s.roots = append(s.roots, root)
	}
	return s.roots[len(s.roots)-1], nil
}

// newRoot creates a self-signed root CA for the current trust domain.
// s.mu must be held.
func (s *Server) newRoot() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate root key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"spiretest"}, SerialNumber: fmt.Sprint(len(s.roots) + 1)},
		URIs:                  []*url.URL{s.trustDomain.ID().URL()},
		NotBefore:             now.Add(-notBeforeCushion),
		NotAfter:              now.Add(rootTTL),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create root: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse root: %w", err)
	}
	return &authority{cert: cert, key: key}, nil
}

// signDownstreamCA signs a CA certificate for pub with the active root,
// valid for ttl (the fake's CA TTL when 0) but never past the root, as
// SPIRE's credtemplate does. s.mu must be held.
func (s *Server) signDownstreamCA(pub crypto.PublicKey, ttl time.Duration) (*x509.Certificate, error) {
	root, err := s.activeRoot()
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = s.caTTL
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(ttl)
	if notAfter.After(root.cert.NotAfter) {
		notAfter = root.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization:       root.cert.Subject.Organization,
			OrganizationalUnit: []string{"DOWNSTREAM-1"},
		},
		URIs:                  []*url.URL{s.trustDomain.ID().URL()},
		NotBefore:             now.Add(-notBeforeCushion),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root.cert, pub, root.key)
	if err != nil {
		return nil, fmt.Errorf("sign downstream CA: %w", err)
	}
	return x509.ParseCertificate(der)
}

// serialNumber returns a random serial number in [1, 2^128].
func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
