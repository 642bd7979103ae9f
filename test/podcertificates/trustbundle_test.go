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
	"context"
	"crypto/x509"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestClusterTrustBundleFollowsRotation walks SPIRE's X.509 CA through a rotation with its
// CLI (prepare, activate, taint, revoke) and checks after each step that the
// ClusterTrustBundle pods mount holds exactly the authorities `spire-server bundle show`
// lists, within a few of spire-registrar's 2s resyncs; that tainting the old authority makes
// spire-registrar renew its CA, so that a certificate issued from then on chains to the new
// authority only; and that once the old authority is revoked, the bundle no longer lets pods
// trust what it signed.
func TestClusterTrustBundleFollowsRotation(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	r := w.startReady(t)
	ctx := t.Context()
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	pod := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
	w.waitEntry(t, saID("web"), true)
	spire := w.stack.SPIRE

	// step waits until the ClusterTrustBundle holds exactly SPIRE's X.509 authorities, and
	// returns them.
	step := func(t *testing.T, what string) []*x509.Certificate {
		t.Helper()
		since := time.Now()
		var want, got []*x509.Certificate
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			auths, err := spire.BundleX509Authorities(ctx)
			if err != nil {
				return false, nil
			}
			want = want[:0]
			for _, a := range auths {
				want = append(want, a.Certificate)
			}
			ctb, err := w.admin.CertificatesV1().ClusterTrustBundles().Get(ctx, bundleName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if got, err = parsePEMCerts(ctb.Spec.TrustBundle); err != nil {
				return false, err
			}
			if ctb.Spec.SignerName != signerName {
				t.Fatalf("ClusterTrustBundle %s is for signer %s, want %s", bundleName, ctb.Spec.SignerName, signerName)
			}
			return sameCerts(got, want), nil
		})
		if err != nil {
			t.Fatalf("%s: ClusterTrustBundle holds %s, SPIRE's bundle %s; not the same within 30s: %v", what, authorityIDs(got), authorityIDs(want), err)
		}
		t.Logf("%s: ClusterTrustBundle holds SPIRE's X.509 authorities %s, %s after the step", what, authorityIDs(want), time.Since(since).Round(time.Millisecond))
		return want
	}
	// issue has the node request a certificate for the pod and returns its chain.
	issue := func(t *testing.T) []*x509.Certificate {
		t.Helper()
		pcr, _ := w.request(t, pod, realcluster.PodCertificateRequestOptions{})
		got := w.waitEnded(t, pcr)
		if o := realcluster.PodCertificateRequestOutcome(got); o != certificatesv1.PodCertificateRequestConditionTypeIssued {
			t.Fatalf("request %s, want Issued: %+v", o, got.Status.Conditions)
		}
		return parseChain(t, got.Status.CertificateChain)
	}

	first := step(t, "at start")
	if len(first) != 1 {
		t.Fatalf("a fresh SPIRE server has %d X.509 authorities, want 1", len(first))
	}
	oldRoot := first[0]
	before := issue(t)
	assertChainsTo(t, "a certificate issued before the rotation", before, oldRoot, true)

	prepared, err := spire.LocalAuthorityX509(ctx, realcluster.LocalAuthorityPrepare, "")
	if err != nil {
		t.Fatal(err)
	}
	both := step(t, "prepare")
	i := slices.IndexFunc(both, func(c *x509.Certificate) bool { return hex.EncodeToString(c.SubjectKeyId) == prepared.ID })
	if len(both) != 2 || i < 0 {
		t.Fatalf("after prepare, SPIRE's bundle holds %s; want the old authority and the prepared %s", authorityIDs(both), prepared.ID)
	}
	newRoot := both[i]

	renewals, err := r.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spire.LocalAuthorityX509(ctx, realcluster.LocalAuthorityActivate, prepared.ID); err != nil {
		t.Fatal(err)
	}
	oldID := hex.EncodeToString(oldRoot.SubjectKeyId)
	if _, err := spire.LocalAuthorityX509(ctx, realcluster.LocalAuthorityTaint, oldID); err != nil {
		t.Fatal(err)
	}
	tainted := time.Now()
	_, renewed := waitMetrics(t, r, 30*time.Second, "a CA renewal after the taint", func(m map[string]float64) bool {
		return m[caRenewalsSuccess] > renewals[caRenewalsSuccess]
	})
	t.Logf("activate %s, taint %s: spire-registrar renewed its CA %s after the taint (renewals %v → %v)",
		prepared.ID, oldID, renewed.at.Sub(tainted).Round(time.Millisecond), renewals[caRenewalsSuccess], renewed.series[caRenewalsSuccess])
	step(t, "activate and taint")
	after := issue(t)
	assertChainsTo(t, "a certificate issued after the taint", after, newRoot, true)
	assertChainsTo(t, "a certificate issued after the taint", after, oldRoot, false)

	if _, err := spire.LocalAuthorityX509(ctx, realcluster.LocalAuthorityRevoke, oldID); err != nil {
		t.Fatal(err)
	}
	last := step(t, "revoke")
	if len(last) != 1 || !last[0].Equal(newRoot) {
		t.Fatalf("after revoke, SPIRE's bundle holds %s; want only %s", authorityIDs(last), prepared.ID)
	}
	// What a pod that trusts the ClusterTrustBundle sees now: the new certificate verifies as
	// an X509-SVID, the one chained to the revoked authority does not.
	ctb, err := w.admin.CertificatesV1().ClusterTrustBundles().Get(ctx, bundleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := x509bundle.Parse(spiffeid.RequireTrustDomainFromString(trustDomain), []byte(ctb.Spec.TrustBundle))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := x509svid.Verify(after, trusted); err != nil {
		t.Errorf("the certificate issued after the taint does not verify against the ClusterTrustBundle: %v", err)
	}
	if _, _, err := x509svid.Verify(before, trusted); err == nil {
		t.Errorf("the certificate chained to the revoked authority still verifies against the ClusterTrustBundle")
	} else {
		t.Logf("the certificate chained to the revoked authority no longer verifies against the ClusterTrustBundle: %v", err)
	}
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}

// assertChainsTo checks whether chain (leaf first) verifies to root alone, as want says.
func assertChainsTo(t *testing.T, what string, chain []*x509.Certificate, root *x509.Certificate, want bool) {
	t.Helper()
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root)
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if got := err == nil; got != want {
		t.Errorf("%s chains to authority %x: %t, want %t (%v)", what, root.SubjectKeyId, got, want, err)
	}
}

// sameCerts reports whether a and b hold the same certificates, in any order.
func sameCerts(a, b []*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(c *x509.Certificate) string { return string(c.Raw) }
	ka, kb := make([]string, 0, len(a)), make([]string, 0, len(b))
	for i := range a {
		ka, kb = append(ka, key(a[i])), append(kb, key(b[i]))
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// authorityIDs names certificates by their subject key IDs, as SPIRE's CLI names authorities.
func authorityIDs(certs []*x509.Certificate) string {
	ids := make([]string, 0, len(certs))
	for _, c := range certs {
		ids = append(ids, hex.EncodeToString(c.SubjectKeyId))
	}
	return "[" + strings.Join(ids, ", ") + "]"
}
