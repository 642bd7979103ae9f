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

package podcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testTD = spiffeid.RequireTrustDomainFromString("example.org")

// testPKI is a trust domain's root and a downstream CA under it, with intermediates
// between them when asked, as SPIRE with an upstream authority hands them out.
type testPKI struct {
	root   *x509.Certificate
	ca     CA
	bundle *x509bundle.Bundle
}

func newTestPKI(t *testing.T, now time.Time, intermediates int) testPKI {
	t.Helper()
	root, rootKey := testCA(t, nil, nil, now, now.Add(30*24*time.Hour))
	parent, parentKey := root, rootKey
	var chain []*x509.Certificate
	for range intermediates {
		parent, parentKey = testCA(t, parent, parentKey, now, now.Add(10*24*time.Hour))
		chain = append([]*x509.Certificate{parent}, chain...)
	}
	ca, caKey := testCA(t, parent, parentKey, now, now.Add(48*time.Hour))
	return testPKI{
		root:   root,
		ca:     CA{Chain: append([]*x509.Certificate{ca}, chain...), Key: caKey},
		bundle: x509bundle.FromX509Authorities(testTD, []*x509.Certificate{root}),
	}
}

// testCA returns a P-256 CA of testTD signed by parent, or self-signed when parent is nil.
func testCA(t *testing.T, parent *x509.Certificate, parentKey crypto.Signer, now, notAfter time.Time) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := serialNumber()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"test"}, SerialNumber: serial.String()},
		URIs:                  []*url.URL{testTD.ID().URL()},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// decodeChain returns the DER certificates of a PEM chain, failing on any other block.
func decodeChain(t *testing.T, chainPEM string) [][]byte {
	t.Helper()
	var ders [][]byte
	rest := []byte(chainPEM)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) > 0 {
			t.Fatalf("chain holds a %q block with headers %v", block.Type, block.Headers)
		}
		ders = append(ders, block.Bytes)
	}
	if strings.TrimSpace(string(rest)) != "" {
		t.Fatalf("chain ends with %q", rest)
	}
	return ders
}

func TestIssue(t *testing.T) {
	now := time.Now()
	id := spiffeid.RequireFromString("spiffe://example.org/ns/web/sa/web")
	for _, tc := range []struct {
		name          string
		key           string
		intermediates int
		dnsNames      []string
		wantUsage     x509.KeyUsage
		wantCN        string
	}{
		{name: "P-256", key: "P-256", dnsNames: []string{"web.ns.svc", "web"}, wantUsage: x509.KeyUsageDigitalSignature, wantCN: "web.ns.svc"},
		{name: "P-384 without DNS names", key: "P-384", wantUsage: x509.KeyUsageDigitalSignature},
		{name: "RSA 3072", key: "RSA 3072", dnsNames: []string{"web"}, wantUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, wantCN: "web"},
		{name: "RSA 4096", key: "RSA 4096", wantUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment},
		{name: "two intermediates and a wildcard", key: "P-256", intermediates: 2, dnsNames: []string{"*.web.ns.svc"}, wantUsage: x509.KeyUsageDigitalSignature, wantCN: "*.web.ns.svc"},
		{name: "first DNS name too long for a CN", key: "P-256", dnsNames: []string{strings.Repeat("a", 60) + ".example.com"}, wantUsage: x509.KeyUsageDigitalSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pki := newTestPKI(t, now, tc.intermediates)
			key := testKey(t, tc.key)
			v, err := Lifetime(now, nil, 0, pki.ca.Chain[0].NotAfter)
			if err != nil {
				t.Fatal(err)
			}
			chainPEM, leaf, err := Issue(pki.ca, key.Public(), id, tc.dnsNames, v)
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}

			// The chain: the leaf, then the CA's chain, and no root.
			ders := decodeChain(t, chainPEM)
			if len(ders) != 1+len(pki.ca.Chain) || string(ders[0]) != string(leaf.Raw) {
				t.Fatalf("chain of %d certificates, want the leaf then the CA's %d", len(ders), len(pki.ca.Chain))
			}
			for i, c := range pki.ca.Chain {
				if string(ders[i+1]) != string(c.Raw) {
					t.Errorf("chain certificate %d is not the CA chain's %d", i+1, i)
				}
			}
			if slices.ContainsFunc(ders, func(der []byte) bool { return string(der) == string(pki.root.Raw) }) {
				t.Error("the chain holds the root")
			}

			// go-spiffe verifies the chain against the trust domain's root and reads the ID.
			gotID, chains, err := x509svid.ParseAndVerify(ders, pki.bundle, x509svid.WithTime(now))
			if err != nil {
				t.Fatalf("x509svid.ParseAndVerify: %v", err)
			}
			if gotID != id || len(chains) == 0 {
				t.Errorf("verified ID %s with %d chains, want %s", gotID, len(chains), id)
			}
			// go-spiffe takes it as an SVID with the pod's key.
			keyDER, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				t.Fatal(err)
			}
			svid, err := x509svid.Parse([]byte(chainPEM), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
			if err != nil {
				t.Fatalf("x509svid.Parse: %v", err)
			}
			if svid.ID != id {
				t.Errorf("SVID ID %s, want %s", svid.ID, id)
			}

			// The leaf's profile.
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != id.String() {
				t.Errorf("URI SANs %v, want only %s", leaf.URIs, id)
			}
			if !slices.Equal(leaf.DNSNames, tc.dnsNames) {
				t.Errorf("DNS SANs %v, want %v", leaf.DNSNames, tc.dnsNames)
			}
			if leaf.Subject.CommonName != tc.wantCN {
				t.Errorf("CN %q, want %q", leaf.Subject.CommonName, tc.wantCN)
			}
			if !leaf.BasicConstraintsValid || leaf.IsCA {
				t.Errorf("basic constraints valid %v, cA %v; want valid and false", leaf.BasicConstraintsValid, leaf.IsCA)
			}
			if leaf.KeyUsage != tc.wantUsage {
				t.Errorf("key usage %b, want %b", leaf.KeyUsage, tc.wantUsage)
			}
			if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
				t.Errorf("extended key usages %v, want serverAuth and clientAuth", leaf.ExtKeyUsage)
			}
			if leaf.SerialNumber.Sign() <= 0 || leaf.SerialNumber.BitLen() > 128 {
				t.Errorf("serial number %v is not a positive 128-bit number", leaf.SerialNumber)
			}
			if want, _ := subjectKeyID(key.Public()); string(leaf.SubjectKeyId) != string(want) || len(want) != 20 {
				t.Errorf("subject key ID %x, want %x", leaf.SubjectKeyId, want)
			}
			if len(leaf.AuthorityKeyId) == 0 || string(leaf.AuthorityKeyId) != string(pki.ca.Chain[0].SubjectKeyId) {
				t.Errorf("authority key ID %x, want the CA's subject key ID %x", leaf.AuthorityKeyId, pki.ca.Chain[0].SubjectKeyId)
			}
			if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
				t.Error("the leaf is not for the requested key")
			}
			if leaf.Subject.CommonName == "" && !sanCritical(leaf) {
				t.Error("a leaf with an empty subject has a non-critical SAN extension")
			}

			// The status times written with it equal the leaf's, through JSON as the API
			// server stores them, and pass its rules.
			for name, pair := range map[string][2]time.Time{
				"notBefore": {v.NotBefore, leaf.NotBefore},
				"notAfter":  {v.NotAfter, leaf.NotAfter},
			} {
				data, err := json.Marshal(metav1.NewTime(pair[0]))
				if err != nil {
					t.Fatal(err)
				}
				var stored metav1.Time
				if err := json.Unmarshal(data, &stored); err != nil {
					t.Fatal(err)
				}
				if !stored.Time.Equal(pair[1]) {
					t.Errorf("status.%s %v after a round trip differs from the leaf's %v", name, stored.Time, pair[1])
				}
			}
			checkStatusRules(t, Validity{NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter, BeginRefreshAt: v.BeginRefreshAt}, now, DefaultMaxExpirationSeconds)
			if len(chainPEM) > MaxCertificateChainBytes {
				t.Errorf("chain of %d bytes", len(chainPEM))
			}
		})
	}
}

// sanCritical reports whether the leaf's subject alternative name extension is critical.
func sanCritical(leaf *x509.Certificate) bool {
	for _, ext := range leaf.Extensions {
		if ext.Id.Equal([]int{2, 5, 29, 17}) {
			return ext.Critical
		}
	}
	return false
}

func TestIssueSerialNumbersDiffer(t *testing.T) {
	now := time.Now()
	pki := newTestPKI(t, now, 0)
	v, err := Lifetime(now, nil, 0, pki.ca.Chain[0].NotAfter)
	if err != nil {
		t.Fatal(err)
	}
	pub := testKey(t, "P-256").Public()
	id := spiffeid.RequireFromString("spiffe://example.org/w")
	seen := map[string]bool{}
	for range 20 {
		_, leaf, err := Issue(pki.ca, pub, id, nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if seen[leaf.SerialNumber.String()] {
			t.Fatalf("serial number %v issued twice", leaf.SerialNumber)
		}
		seen[leaf.SerialNumber.String()] = true
	}
}

func TestIssueRefuses(t *testing.T) {
	now := time.Now()
	pki := newTestPKI(t, now, 0)
	v, err := Lifetime(now, nil, 0, pki.ca.Chain[0].NotAfter)
	if err != nil {
		t.Fatal(err)
	}
	pub := testKey(t, "P-256").Public()
	id := spiffeid.RequireFromString("spiffe://example.org/w")
	for _, tc := range []struct {
		name     string
		ca       CA
		pub      crypto.PublicKey
		id       spiffeid.ID
		dnsNames []string
		v        Validity
		want     string
	}{
		{name: "no CA", ca: CA{}, want: "no CA"},
		{name: "no CA key", ca: CA{Chain: pki.ca.Chain}, want: "no CA"},
		{name: "CA key not the CA certificate's", ca: CA{Chain: pki.ca.Chain, Key: testKey(t, "P-256")}, want: "doesn't match"},
		{name: "unsupported key", pub: testKey(t, "Ed25519").Public(), want: "Ed25519"},
		{name: "no SPIFFE ID", id: spiffeid.ID{}, want: "no SPIFFE ID"},
		{name: "trust domain's ID", id: testTD.ID(), want: "no path"},
		{name: "other trust domain", id: spiffeid.RequireFromString("spiffe://other.org/w"), want: "not in the CA's trust domain"},
		{name: "empty DNS name", dnsNames: []string{"web", ""}, want: "empty DNS name"},
		{name: "DNS name with ..", dnsNames: []string{"web..ns"}, want: `".."`},
		{name: "DNS name with a leading dot", dnsNames: []string{".web"}, want: "dot"},
		{name: "DNS name with a trailing dot", dnsNames: []string{"web."}, want: "dot"},
		{name: "DNS name not ASCII", dnsNames: []string{"wéb"}, want: "issue X509-SVID"},
		{
			name: "fraction of a second",
			v:    Validity{NotBefore: v.NotBefore.Add(time.Millisecond), NotAfter: v.NotAfter, BeginRefreshAt: v.BeginRefreshAt},
			want: "whole seconds",
		},
		{name: "ends before it starts", v: Validity{NotBefore: v.NotAfter, NotAfter: v.NotBefore}, want: "before it starts"},
		{
			name: "outlives the CA",
			v:    Validity{NotBefore: v.NotBefore, NotAfter: pki.ca.Chain[0].NotAfter.Truncate(time.Second).Add(time.Hour)},
			want: "after the CA",
		},
		{name: "chain too large", dnsNames: manyNames(3000), want: "more than the 102400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, p, i, val := pki.ca, pub, id, v
			if tc.ca.Chain != nil || tc.ca.Key != nil || tc.name == "no CA" {
				ca = tc.ca
			}
			if tc.pub != nil {
				p = tc.pub
			}
			if tc.id != (spiffeid.ID{}) || tc.name == "no SPIFFE ID" {
				i = tc.id
			}
			if !tc.v.NotBefore.IsZero() {
				val = tc.v
			}
			chainPEM, leaf, err := Issue(ca, p, i, tc.dnsNames, val)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if chainPEM != "" || leaf != nil {
				t.Error("a refused issue returned a certificate")
			}
		})
	}
}

func manyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "name-" + big.NewInt(int64(i)).String() + ".web.ns.svc.cluster.local"
	}
	return names
}
