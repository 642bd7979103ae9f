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
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestIssuedCertificateIsAnX509SVID requests, as the pod's node, a certificate for a pod a
// ClusterSPIFFEID selects, and checks what a SPIFFE verifier and a user reading the
// certificate would: it is an X509-SVID that verifies against SPIRE's own trust bundle, for
// the SPIFFE ID and DNS names the ClusterSPIFFEID renders, with the ClusterSPIFFEID's TTL.
func TestIssuedCertificateIsAnX509SVID(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	t.Logf("components up in %s", time.Since(start).Round(time.Millisecond))
	w.startReady(t)
	t.Logf("spire-registrar ready %s after the start", time.Since(start).Round(time.Millisecond))
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	pod := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"},
		projection: func(p *corev1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr.To[int32](7200) }})
	wantID := saID("web")
	wantDNS := []string{"web-0.default.pod.cluster.local", "web.default.svc.cluster.local"}
	w.waitEntry(t, wantID, true)
	t.Logf("world ready in %s", time.Since(start).Round(time.Millisecond))

	// The request allows two hours; the ClusterSPIFFEID's 90 minutes are shorter and win.
	requested := time.Now()
	pcr, key := w.request(t, pod, realcluster.PodCertificateRequestOptions{})
	shown := pcr.DeepCopy()
	shown.ManagedFields = nil
	created, err := yaml.Marshal(shown)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PodCertificateRequest as the node created it:\n%s", created)
	got := w.waitEnded(t, pcr)
	if o := realcluster.PodCertificateRequestOutcome(got); o != certificatesv1.PodCertificateRequestConditionTypeIssued {
		t.Fatalf("request %s, want Issued: %+v", o, got.Status.Conditions)
	}
	t.Logf("request created → Issued in %s; condition: %s", time.Since(requested).Round(time.Millisecond), got.Status.Conditions[0].Message)

	chain := parseChain(t, got.Status.CertificateChain)
	id, chains, err := x509svid.ParseAndVerify(rawCerts(chain), w.spireBundle(t))
	if err != nil {
		t.Fatalf("the issued chain does not verify as an X509-SVID against `spire-server bundle show`: %v", err)
	}
	var path []string
	for _, c := range chains[0] {
		path = append(path, c.Subject.String())
	}
	t.Logf("go-spiffe x509svid.ParseAndVerify against `spire-server bundle show`: OK, SPIFFE ID %s, chain %s", id, strings.Join(path, " → "))

	leaf := chain[0]
	if id.String() != wantID {
		t.Errorf("SPIFFE ID %s, want %s", id, wantID)
	}
	if len(leaf.URIs) != 1 {
		t.Errorf("leaf has URI SANs %v, want exactly one", leaf.URIs)
	}
	if !slices.Equal(leaf.DNSNames, wantDNS) {
		t.Errorf("DNS names %v, want %v", leaf.DNSNames, wantDNS)
	}
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Errorf("leaf is a CA (IsCA %t, key usage %b)", leaf.IsCA, leaf.KeyUsage)
	}
	if pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
		t.Errorf("leaf's key is not the one the node generated")
	}
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life != 90*time.Minute {
		t.Errorf("leaf valid for %s, want the ClusterSPIFFEID's ttl 1h30m (below maxExpirationSeconds 2h)", life)
	}
	st := got.Status
	if !st.NotBefore.Time.Equal(leaf.NotBefore) || !st.NotAfter.Time.Equal(leaf.NotAfter) {
		t.Errorf("status notBefore %s notAfter %s; leaf's %s and %s", st.NotBefore, st.NotAfter, leaf.NotBefore, leaf.NotAfter)
	}
	half := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)
	if d := st.BeginRefreshAt.Sub(half); d < -time.Minute || d > time.Minute {
		t.Errorf("beginRefreshAt %s is %s from half way (%s)", st.BeginRefreshAt, d, half)
	}
	t.Logf("leaf valid %s to %s (%s), beginRefreshAt %s", leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339),
		leaf.NotAfter.Sub(leaf.NotBefore), st.BeginRefreshAt.Format(time.RFC3339))

	if openssl, err := exec.LookPath("openssl"); err == nil {
		cmd := exec.Command(openssl, "x509", "-noout", "-text")
		cmd.Stdin = bytes.NewReader(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("openssl x509: %v\n%s", err, out)
		}
		t.Logf("openssl x509 -noout -text of the issued leaf:\n%s", out)
	}
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}

// parseChain parses a PEM certificate chain, leaf first.
func parseChain(t *testing.T, chainPEM string) []*x509.Certificate {
	t.Helper()
	certs, err := parsePEMCerts(chainPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) == 0 {
		t.Fatalf("no certificate in chain %q", chainPEM)
	}
	return certs
}

// parsePEMCerts parses the CERTIFICATE blocks of s, in order.
func parsePEMCerts(s string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(s)
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return certs, nil
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, cert)
	}
}

// rawCerts returns the certificates' DER.
func rawCerts(certs []*x509.Certificate) [][]byte {
	raw := make([][]byte, 0, len(certs))
	for _, c := range certs {
		raw = append(raw, c.Raw)
	}
	return raw
}
