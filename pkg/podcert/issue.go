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
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// MaxCertificateChainBytes is kube-apiserver's limit on status.certificateChain
// (k8s.io/kubernetes v1.37.1 pkg/apis/certificates MaxCertificateChainSize).
const MaxCertificateChainBytes = 100 * 1024

// maxCommonNameBytes is X.509's upper bound on a common name (RFC 5280 ub-common-name).
const maxCommonNameBytes = 64

// CA is the intermediate CA that signs X509-SVIDs: its certificate first, then the
// intermediates up to one of the trust domain's roots (never a root), and its key.
type CA struct {
	Chain []*x509.Certificate
	Key   crypto.Signer
}

// Issue signs an X509-SVID for pub with ca, for the SPIFFE ID id and the DNS names given,
// valid over v (from Lifetime). It returns the PEM chain for status.certificateChain, the
// leaf first and then ca.Chain, and the parsed leaf.
//
// The leaf follows the X509-SVID specification as SPIRE's workload X509-SVIDs do
// (pkg/server/credtemplate in SPIRE v1.15.3): id as its only URI SAN; the DNS names as DNS
// SANs and the first as the subject's common name; basic constraints with cA false; key
// usage digitalSignature, and keyEncipherment for an RSA key, the only kind that transports
// keys (SPIRE sets keyEncipherment and keyAgreement whatever the key; the specification
// allows both and says they mostly make sense for RSA only); extended key usages serverAuth
// and clientAuth; a random 128-bit serial number; a subject key ID, and the CA's as the
// authority key ID.
func Issue(ca CA, pub crypto.PublicKey, id spiffeid.ID, dnsNames []string, v Validity) (string, *x509.Certificate, error) {
	if len(ca.Chain) == 0 || ca.Key == nil {
		return "", nil, errors.New("issue X509-SVID: no CA")
	}
	caCert := ca.Chain[0]
	if d := checkKeyType(pub); d != nil {
		return "", nil, fmt.Errorf("issue X509-SVID: %s", d.Message)
	}
	if err := checkID(id, caCert); err != nil {
		return "", nil, fmt.Errorf("issue X509-SVID: %w", err)
	}
	for _, name := range dnsNames {
		if err := checkDNSName(name); err != nil {
			return "", nil, fmt.Errorf("issue X509-SVID: %w", err)
		}
	}
	if err := checkValidity(v, caCert); err != nil {
		return "", nil, fmt.Errorf("issue X509-SVID: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return "", nil, fmt.Errorf("issue X509-SVID: %w", err)
	}
	skid, err := subjectKeyID(pub)
	if err != nil {
		return "", nil, fmt.Errorf("issue X509-SVID: subject key ID: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		URIs:                  []*url.URL{id.URL()},
		DNSNames:              dnsNames,
		NotBefore:             v.NotBefore,
		NotAfter:              v.NotAfter,
		BasicConstraintsValid: true,
		IsCA:                  false,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		SubjectKeyId:          skid,
		AuthorityKeyId:        caCert.SubjectKeyId,
	}
	if _, ok := pub.(*rsa.PublicKey); ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	// With an empty subject, Go marks the SAN extension critical, as RFC 5280 requires.
	if len(dnsNames) > 0 && len(dnsNames[0]) <= maxCommonNameBytes {
		tmpl.Subject = pkix.Name{CommonName: dnsNames[0]}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, pub, ca.Key)
	if err != nil {
		return "", nil, fmt.Errorf("issue X509-SVID: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return "", nil, fmt.Errorf("issue X509-SVID: parse the leaf: %w", err)
	}
	var chain strings.Builder
	for _, c := range append([]*x509.Certificate{leaf}, ca.Chain...) {
		_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}) // a strings.Builder never fails
	}
	if chain.Len() > MaxCertificateChainBytes {
		return "", nil, fmt.Errorf("issue X509-SVID: the chain is %d bytes, more than the %d kube-apiserver accepts", chain.Len(), MaxCertificateChainBytes)
	}
	return chain.String(), leaf, nil
}

// checkID requires id to be a workload's SPIFFE ID (one with a path, as the X509-SVID
// specification requires of leaves) in the trust domain of the CA, when the CA names one.
func checkID(id spiffeid.ID, ca *x509.Certificate) error {
	if id.IsZero() {
		return errors.New("no SPIFFE ID")
	}
	if id.Path() == "" {
		return fmt.Errorf("SPIFFE ID %q has no path; a leaf X509-SVID's must have one", id)
	}
	if len(ca.URIs) == 1 {
		if caID, err := spiffeid.FromURI(ca.URIs[0]); err == nil && !id.MemberOf(caID.TrustDomain()) {
			return fmt.Errorf("SPIFFE ID %q is not in the CA's trust domain %q", id, caID.TrustDomain())
		}
	}
	return nil
}

// checkDNSName applies kube-apiserver's rules for a leaf's DNS names
// (ValidatePodCertificateRequestStatusUpdate): not empty, no "..", no leading or trailing
// dot.
func checkDNSName(name string) error {
	switch {
	case name == "":
		return errors.New("empty DNS name")
	case strings.Contains(name, ".."):
		return fmt.Errorf("DNS name %s contains \"..\"", quote(name))
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, "."):
		return fmt.Errorf("DNS name %s starts or ends with a dot", quote(name))
	}
	return nil
}

// checkValidity requires whole seconds, so that the status times equal the leaf's, and a
// validity that ends after it starts and no later than the CA.
func checkValidity(v Validity, ca *x509.Certificate) error {
	if v.NotBefore.Nanosecond() != 0 || v.NotAfter.Nanosecond() != 0 {
		return errors.New("validity is not in whole seconds, which X.509 cannot carry")
	}
	if !v.NotAfter.After(v.NotBefore) {
		return fmt.Errorf("validity ends (%s) before it starts (%s)", v.NotAfter, v.NotBefore)
	}
	if v.NotAfter.After(ca.NotAfter) {
		return fmt.Errorf("validity ends (%s) after the CA (%s)", v.NotAfter, ca.NotAfter)
	}
	return nil
}

// maxSerial is 2^128 - 1.
var maxSerial = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// serialNumber returns a random serial number in [1, 2^128 - 1].
func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, maxSerial)
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// subjectKeyID computes a key identifier by RFC 7093 section 2 method 1: the leftmost 160
// bits of the SHA-256 hash of the subjectPublicKey BIT STRING's value. Go uses the same
// method for the CA certificates it creates.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	var spki struct {
		Algorithm        pkix.AlgorithmIdentifier
		SubjectPublicKey asn1.BitString
	}
	if rest, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, err
	} else if len(rest) > 0 {
		return nil, errors.New("trailing data after the public key")
	}
	sum := sha256.Sum256(spki.SubjectPublicKey.Bytes)
	return sum[:20], nil
}
