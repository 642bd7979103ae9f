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

package podcertificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The marks spire-registrar puts on its ClusterTrustBundles, as docs/pod-certificates.md
// names them.
const (
	managedByLabel             = "app.kubernetes.io/managed-by"
	trustDomainLabel           = "spire.spiffe.io/trust-domain"
	ownerTrustDomainAnnotation = "spire.spiffe.io/owner-trust-domain"
	ownerClassNameAnnotation   = "spire.spiffe.io/owner-class-name"
	resyncSuccesses            = `spire_registrar_full_resyncs_total{controller="` + controllerName + `",result="success"}`
)

// TestOneSignerPerTrustDomainAndClass: spire-registrar refuses to start for a signer name
// another spire-registrar publishes a bundle of, here one of another trust domain, naming
// that bundle: the two would take each other's requests, and pods would trust both trust
// domains. Once that bundle is gone it starts, publishes its own bundle with its marks, and
// leaves alone a bundle of the signer name it did not publish, through several resyncs.
func TestOneSignerPerTrustDomainAndClass(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	ctx := t.Context()
	bundles := w.admin.CertificatesV1().ClusterTrustBundles()

	const foreignName = "spire.spiffe.io:x509-svid:other.test"
	foreign := &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{
			Name:        foreignName,
			Labels:      map[string]string{managedByLabel: "spire-registrar", trustDomainLabel: "other.test"},
			Annotations: map[string]string{ownerTrustDomainAnnotation: "other.test", ownerClassNameAnnotation: ""},
		},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: selfSignedPEM(t, "other.test")},
	}
	if _, err := bundles.Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := w.start(t)
	select {
	case <-r.Done():
	case <-time.After(time.Minute):
		t.Fatalf("spire-registrar still runs a minute after its start, beside another instance's bundle of its signer name:\n%s", r.Logs())
	}
	out := r.Logs()
	last := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	if r.Err() == nil {
		t.Fatalf("spire-registrar exited with status 0:\n%s", out)
	}
	for _, want := range []string{"podCertificates.signerName", foreignName, "other.test"} {
		if !strings.Contains(last, want) {
			t.Errorf("the last line of its output does not name %q:\n%s", want, last)
		}
	}
	t.Logf("beside another instance's bundle, spire-registrar exited (%v), saying:\n%s", r.Err(), last)
	if _, err := bundles.Get(ctx, foreignName, metav1.GetOptions{}); err != nil {
		t.Errorf("the other instance's bundle is gone: %v", err)
	}

	if err := bundles.Delete(ctx, foreignName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const plantedName = "spire.spiffe.io:x509-svid:planted"
	planted, err := bundles.Create(ctx, &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: plantedName},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: selfSignedPEM(t, "planted")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r = w.startReady(t)
	ours, err := bundles.Get(ctx, bundleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{managedByLabel: "spire-registrar", trustDomainLabel: trustDomain} {
		if ours.Labels[k] != v {
			t.Errorf("ClusterTrustBundle %s: label %s=%q, want %q", bundleName, k, ours.Labels[k], v)
		}
	}
	for k, v := range map[string]string{ownerTrustDomainAnnotation: trustDomain, ownerClassNameAnnotation: ""} {
		if got, ok := ours.Annotations[k]; !ok || got != v {
			t.Errorf("ClusterTrustBundle %s: annotation %s=%q (set %t), want %q", bundleName, k, got, ok, v)
		}
	}
	// Three more resyncs, each of which brings the bundles up to date, then the bundle
	// spire-registrar did not publish must be as it was.
	scrape, err := r.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitMetrics(t, r, time.Minute, "three resyncs", func(m map[string]float64) bool { return m[resyncSuccesses] >= scrape[resyncSuccesses]+3 })
	got, err := bundles.Get(ctx, plantedName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the bundle of the signer name spire-registrar did not publish is gone after its resyncs: %v", err)
	}
	if got.ResourceVersion != planted.ResourceVersion {
		t.Errorf("the bundle spire-registrar did not publish was changed: %+v", got)
	}
	t.Logf("bundle %s survived three resyncs; ours is %s with labels %v, annotations %v", plantedName, bundleName, ours.Labels, ours.Annotations)
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}

// selfSignedPEM is a self-signed CA certificate in PEM, which kube-apiserver accepts in a
// ClusterTrustBundle.
func selfSignedPEM(t *testing.T, name string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
