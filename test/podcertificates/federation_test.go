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
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// federatedSigner is the config's podCertificates.federatedSignerName in these tests.
	federatedSigner = "spire.spiffe.io/x509-svid-federated"
	// partnerTD is the trust domain of the second SPIRE server, which the first federates with.
	partnerTD = "partner.test"
	// partnerBundleName is the ClusterTrustBundle of partner.test's X.509 authorities.
	partnerBundleName = "spire.spiffe.io:x509-svid-federated:" + partnerTD
)

// TestFederatedTrustBundles federates the world's SPIRE server with a second one, of
// partner.test, through a ClusterFederatedTrustDomain, and checks what pods see:
//   - partner.test's X.509 authorities, as SPIRE holds them, are a ClusterTrustBundle of the
//     federated signer name labelled spire.spiffe.io/trust-domain=partner.test;
//   - a pod whose certificate the signer issued, trusting the bundles a pod that asks for
//     partner.test mounts, accepts a peer's X509-SVID from partner.test's SPIRE server in an
//     mTLS handshake;
//   - a pod that mounts every bundle of the signer name (an empty label selector) gets no
//     authority of partner.test, and refuses that peer;
//   - partner.test's rotation, sent to SPIRE with the ClusterFederatedTrustDomain, reaches the
//     bundle; and when the federation ends the bundle is deleted, the signer's own kept.
func TestFederatedTrustBundles(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{federatedSignerName: federatedSigner})
	ctx := t.Context()
	partner := realcluster.NewSPIRE(t, realcluster.SPIREOptions{TrustDomain: partnerTD})
	cftds := w.stack.SpireAPI.SpireV1alpha1().ClusterFederatedTrustDomains()
	// The bundle endpoint is unreachable: SPIRE keeps the bundle it is given.
	cftd, err := cftds.Create(ctx, &spirev1alpha1.ClusterFederatedTrustDomain{
		ObjectMeta: metav1.ObjectMeta{Name: "partner"},
		Spec: spirev1alpha1.ClusterFederatedTrustDomainSpec{
			TrustDomain: partnerTD, BundleEndpointURL: "https://127.0.0.1:1/bundle",
			BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{Type: "https_web"},
			TrustDomainBundle:     partnerSPIFFEBundle(t, partner),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.startReady(t)
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	pod := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
	w.waitEntry(t, saID("web"), true)

	waitPartnerBundle(t, w, partner, "after the federation is declared")
	ours := w.mounted(t, signerName, labels.Everything())
	for _, c := range ours {
		if !w.spireBundle(t).HasX509Authority(c) {
			t.Errorf("a pod that mounts every bundle of %s gets an authority that is not %s's: %s", signerName, trustDomain, c.Subject)
		}
	}
	asked := w.mounted(t, federatedSigner, labels.SelectorFromSet(labels.Set{trustDomainLabel: partnerTD}))

	podSVID := credentialBundleSVID(t, w.podSVID(t, pod))
	peerSVID := mintSVID(t, partner, "spiffe://"+partnerTD+"/peer")
	td, ptd := spiffeid.RequireTrustDomainFromString(trustDomain), spiffeid.RequireTrustDomainFromString(partnerTD)
	federatedTrust := x509bundle.NewSet(x509bundle.FromX509Authorities(td, ours), x509bundle.FromX509Authorities(ptd, asked))
	ownTrust := x509bundle.NewSet(x509bundle.FromX509Authorities(td, ours))
	// The peer trusts the pod's trust domain with SPIRE's own bundle, as a federated SPIRE's
	// agents would.
	peerTrust := x509bundle.NewSet(w.spireBundle(t))
	if err := handshake(podSVID, federatedTrust, peerSVID, peerTrust); err != nil {
		t.Errorf("the pod that mounts partner.test's bundle refused partner.test's peer: %v", err)
	} else {
		t.Logf("mTLS between the pod (%s, issued by the signer) and the peer (%s, from partner.test's SPIRE): OK", podSVID.ID, peerSVID.ID)
	}
	if err := handshake(podSVID, ownTrust, peerSVID, peerTrust); err == nil {
		t.Errorf("the pod that mounts only the bundles of %s accepted partner.test's peer", signerName)
	} else {
		t.Logf("the pod that did not ask for partner.test's bundle refuses its peer: %v", err)
	}

	prepared, err := partner.LocalAuthorityX509(ctx, realcluster.LocalAuthorityPrepare, "")
	if err != nil {
		t.Fatal(err)
	}
	cftd, err = cftds.Get(ctx, cftd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cftd.Spec.TrustDomainBundle = partnerSPIFFEBundle(t, partner)
	if _, err := cftds.Update(ctx, cftd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := waitPartnerBundle(t, w, partner, "after partner.test prepared authority "+prepared.ID); len(got) != 2 {
		t.Errorf("after partner.test prepared a new authority its bundle holds %s, want two", authorityIDs(got))
	}

	if err := cftds.Delete(ctx, cftd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := w.admin.CertificatesV1().ClusterTrustBundles().Get(ctx, partnerBundleName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("ClusterTrustBundle %s still there a minute after the federation ended: %v", partnerBundleName, err)
	}
	t.Logf("ClusterTrustBundle %s deleted %s after the ClusterFederatedTrustDomain", partnerBundleName, time.Since(ended).Round(time.Millisecond))
	if _, err := w.admin.CertificatesV1().ClusterTrustBundles().Get(ctx, bundleName, metav1.GetOptions{}); err != nil {
		t.Errorf("the signer's own bundle is gone with the federation: %v", err)
	}
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}

// partnerSPIFFEBundle is the partner server's bundle in the SPIFFE format, as a
// ClusterFederatedTrustDomain's trustDomainBundle holds it.
func partnerSPIFFEBundle(t *testing.T, partner *realcluster.SPIRE) string {
	t.Helper()
	out, err := partner.CLI(t.Context(), "bundle show", "-format", "spiffe")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// waitPartnerBundle waits until partner.test's ClusterTrustBundle holds exactly the partner
// server's X.509 authorities, labelled with its trust domain, and returns them.
func waitPartnerBundle(t *testing.T, w *world, partner *realcluster.SPIRE, what string) []*x509.Certificate {
	t.Helper()
	since := time.Now()
	var want, got []*x509.Certificate
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		auths, err := partner.BundleX509Authorities(ctx)
		if err != nil {
			return false, nil
		}
		want = want[:0]
		for _, a := range auths {
			want = append(want, a.Certificate)
		}
		got = w.mounted(t, federatedSigner, labels.SelectorFromSet(labels.Set{trustDomainLabel: partnerTD}))
		return sameCerts(got, want), nil
	})
	if err != nil {
		t.Fatalf("%s: the bundles of %s labelled %s=%s hold %s, partner.test's SPIRE %s; not the same within a minute: %v",
			what, federatedSigner, trustDomainLabel, partnerTD, authorityIDs(got), authorityIDs(want), err)
	}
	t.Logf("%s: ClusterTrustBundle %s holds partner.test's X.509 authorities %s, %s after", what, partnerBundleName, authorityIDs(got), time.Since(since).Round(time.Millisecond))
	return got
}

// mounted is what a clusterTrustBundle volume source with signerName signer and this label
// selector puts in a pod: the certificates of every bundle of the signer name the selector
// matches, as the kubelet selects them (pkg/kubelet/clustertrustbundle in Kubernetes 1.37.1).
func (w *world) mounted(t *testing.T, signer string, selector labels.Selector) []*x509.Certificate {
	t.Helper()
	list, err := w.admin.CertificatesV1().ClusterTrustBundles().List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.signerName", signer).String(),
		LabelSelector: selector.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*x509.Certificate
	for _, b := range list.Items {
		certs, err := parsePEMCerts(b.Spec.TrustBundle)
		if err != nil {
			t.Fatalf("ClusterTrustBundle %s: %v", b.Name, err)
		}
		out = append(out, certs...)
	}
	return out
}

// credentialBundleSVID writes svid as the kubelet writes a podCertificate source's
// credentialBundlePath (pkg/volume/projected in Kubernetes 1.37.1: the PKCS#8 key as a
// PRIVATE KEY block, then the chain's CERTIFICATE blocks, leaf first), and reads that one file
// back with go-spiffe as docs/pod-certificates.md says an application does: x509svid.Parse
// with the same bytes for the certificates and the key.
func credentialBundleSVID(t *testing.T, svid *x509svid.SVID) *x509svid.SVID {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(svid.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	bundle := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	for _, c := range svid.Certificates {
		bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	read, err := x509svid.Parse(bundle, bundle)
	if err != nil {
		t.Fatalf("go-spiffe does not read the credential bundle: %v", err)
	}
	if read.ID != svid.ID || len(read.Certificates) != len(svid.Certificates) {
		t.Fatalf("the credential bundle reads as %s with %d certificates, want %s with %d", read.ID, len(read.Certificates), svid.ID, len(svid.Certificates))
	}
	return read
}

// mintSVID has the partner server mint an X509-SVID with its CLI.
func mintSVID(t *testing.T, partner *realcluster.SPIRE, id string) *x509svid.SVID {
	t.Helper()
	dir := t.TempDir()
	if _, err := partner.CLI(t.Context(), "x509 mint", "-spiffeID", id, "-write", dir); err != nil {
		t.Fatal(err)
	}
	svid, err := x509svid.Load(filepath.Join(dir, "svid.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return svid
}

// handshake runs an mTLS handshake between the pod, serving with its X509-SVID and trusting
// podTrust, and the peer, a client with its X509-SVID trusting peerTrust, each authorizing
// any SPIFFE ID its trust verifies. It returns the pod's error.
func handshake(pod *x509svid.SVID, podTrust *x509bundle.Set, peer *x509svid.SVID, peerTrust *x509bundle.Set) error {
	serverConn, clientConn := net.Pipe()
	defer serverConn.Close()
	defer clientConn.Close()
	_ = serverConn.SetDeadline(time.Now().Add(10 * time.Second))
	_ = clientConn.SetDeadline(time.Now().Add(10 * time.Second))
	server := tls.Server(serverConn, tlsconfig.MTLSServerConfig(pod, podTrust, tlsconfig.AuthorizeAny()))
	client := tls.Client(clientConn, tlsconfig.MTLSClientConfig(peer, peerTrust, tlsconfig.AuthorizeAny()))
	clientErr := make(chan error, 1)
	go func() {
		err := client.Handshake()
		if err == nil {
			// TLS 1.3: the client learns of the server's refusal only when it reads.
			_, err = client.Read(make([]byte, 1))
		}
		clientErr <- err
	}()
	err := server.Handshake()
	if err == nil {
		_, _ = server.Write([]byte{1})
	}
	_ = serverConn.Close()
	if cerr := <-clientErr; err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		return errors.New("the pod accepted the peer, which then failed: " + cerr.Error())
	}
	return err
}
