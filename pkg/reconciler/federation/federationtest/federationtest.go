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

// Package federationtest builds ClusterFederatedTrustDomains, CAs and SPIFFE bundles for the
// tests of the federation reconciler and controller.
package federationtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// NewCA returns a self-signed CA certificate for a trust domain, as a SPIRE server's root.
func NewCA(t testing.TB, td string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"spire-registrar test"}, CommonName: td},
		URIs:                  []*url.URL{spiffeid.RequireTrustDomainFromString(td).ID().URL()},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// NewJWTKey returns a fresh public key for a JWT authority.
func NewJWTKey(t testing.TB) crypto.PublicKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key.Public()
}

// BundleDoc returns a SPIFFE bundle document for a trust domain, marshalled by go-spiffe.
func BundleDoc(t testing.TB, td string, cas []*x509.Certificate, jwtKeys map[string]crypto.PublicKey, refreshHint time.Duration, seq uint64) string {
	t.Helper()
	b := spiffebundle.FromX509Authorities(spiffeid.RequireTrustDomainFromString(td), cas)
	b.SetJWTAuthorities(jwtKeys)
	if refreshHint > 0 {
		b.SetRefreshHint(refreshHint)
	}
	b.SetSequenceNumber(seq)
	doc, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// Resource returns a ClusterFederatedTrustDomain created age ago.
func Resource(name string, age time.Duration, spec spirev1alpha1.ClusterFederatedTrustDomainSpec) *spirev1alpha1.ClusterFederatedTrustDomain {
	return &spirev1alpha1.ClusterFederatedTrustDomain{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: ktypes.UID("uid-" + name), ResourceVersion: "1", Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age).Truncate(time.Second)),
		},
		Spec: spec,
	}
}

// WebSpec is a valid https_web spec.
func WebSpec(td, url string) spirev1alpha1.ClusterFederatedTrustDomainSpec {
	return spirev1alpha1.ClusterFederatedTrustDomainSpec{
		TrustDomain:           td,
		BundleEndpointURL:     url,
		BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSWebProfileType},
	}
}

// SPIFFESpec is a valid https_spiffe spec with a bundle document.
func SPIFFESpec(td, url, endpointID, bundle string) spirev1alpha1.ClusterFederatedTrustDomainSpec {
	return spirev1alpha1.ClusterFederatedTrustDomainSpec{
		TrustDomain:       td,
		BundleEndpointURL: url,
		BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{
			Type: spirev1alpha1.HTTPSSPIFFEProfileType, EndpointSPIFFEID: endpointID,
		},
		TrustDomainBundle: bundle,
	}
}
