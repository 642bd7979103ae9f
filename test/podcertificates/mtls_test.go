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
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// peerID is the SPIFFE ID the spire-agent gives the mTLS peer process.
const peerID = "spiffe://" + trustDomain + "/agent-workload"

// TestMTLSBetweenPodAndAgentIdentities has two processes complete a real mTLS handshake with
// go-spiffe, each authorizing the other's SPIFFE ID against SPIRE's bundle: this test
// process, holding the certificate spire-registrar issued for a pod (the chain from the
// request's status and the key the node generated), and a second process holding the
// X509-SVID a spire-agent issued it. Pods with certificates from spire-registrar and
// workloads with agent SVIDs thus trust each other. An identity the peer does not authorize
// is refused by it, and a client refuses a peer whose ID it does not authorize.
func TestMTLSBetweenPodAndAgentIdentities(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	w.startReady(t)
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	w.createClusterSPIFFEID(t, "other", podIdentity("other"))
	web := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
	other := w.createPod(t, "other-0", podOptions{serviceAccount: "other", labels: map[string]string{"app": "other"}})
	w.waitEntry(t, saID("web"), true)
	w.waitEntry(t, saID("other"), true)
	p := w.startPeer(t, peerID, saID("web"))
	t.Logf("world and peer ready in %s; the peer listens on %s as %s, accepting %s", time.Since(start).Round(time.Millisecond), p.addr, peerID, saID("web"))

	bundle := w.spireBundle(t)
	webSVID := w.podSVID(t, web)
	peer := tlsconfig.AuthorizeID(spiffeid.RequireFromString(peerID))

	answer, state, err := dialPeer(p.addr, tlsconfig.MTLSClientConfig(webSVID, bundle, peer), "ping from web-0")
	if err != nil {
		t.Fatalf("mTLS from the pod's certificate to the agent's X509-SVID: %v", err)
	}
	server, err := x509svid.IDFromCert(state.PeerCertificates[0])
	if err != nil || server.String() != peerID {
		t.Errorf("the server presented %v (%v), want %s", server, err, peerID)
	}
	if !strings.Contains(answer, "hello "+saID("web")) || !strings.Contains(answer, peerID) {
		t.Errorf("the peer answered %q, want a greeting naming %s and %s", answer, saID("web"), peerID)
	}
	served := p.waitSaid(t, "served ")
	if served != "served "+saID("web") {
		t.Errorf("the peer says %q, want it served %s", served, saID("web"))
	}
	t.Logf("pod %s → agent workload %s: handshake done with %s, peer answered %q; peer says %q",
		saID("web"), peerID, tlsVersion(state.Version), answer, served)

	t.Run("the peer refuses an identity it does not authorize", func(t *testing.T) {
		otherSVID := w.podSVID(t, other)
		_, _, err := dialPeer(p.addr, tlsconfig.MTLSClientConfig(otherSVID, bundle, peer), "ping from other-0")
		if err == nil {
			t.Fatalf("the peer answered a client with %s, which it does not authorize", otherSVID.ID)
		}
		refused := p.waitSaid(t, "refused: ")
		if !strings.Contains(refused, `unexpected ID "`+saID("other")+`"`) {
			t.Errorf("the peer says %q, want its authorizer to name the unexpected ID %s", refused, saID("other"))
		}
		t.Logf("client %s: %v; the peer says %q", otherSVID.ID, err, refused)
	})

	t.Run("the pod refuses a peer it does not authorize", func(t *testing.T) {
		wrong := tlsconfig.AuthorizeID(spiffeid.RequireFromString("spiffe://" + trustDomain + "/not-the-peer"))
		_, _, err := dialPeer(p.addr, tlsconfig.MTLSClientConfig(webSVID, bundle, wrong), "ping from web-0")
		if err == nil || !strings.Contains(err.Error(), `unexpected ID "`+peerID+`"`) {
			t.Fatalf("dialling the peer while authorizing another ID: %v, want the handshake refused for the unexpected ID %s", err, peerID)
		}
		t.Logf("refused by the client: %v", err)
	})
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}

// podSVID has the pod's node request a certificate for it and returns it as an X509-SVID
// with the key the node generated, as the kubelet writes both into the pod's volume.
func (w *world) podSVID(t *testing.T, pod *corev1.Pod) *x509svid.SVID {
	t.Helper()
	pcr, key := w.request(t, pod, realcluster.PodCertificateRequestOptions{})
	got := w.waitEnded(t, pcr)
	if o := realcluster.PodCertificateRequestOutcome(got); o != certificatesv1.PodCertificateRequestConditionTypeIssued {
		t.Fatalf("request for pod %s %s, want Issued: %+v", pod.Name, o, got.Status.Conditions)
	}
	var der []byte
	for _, c := range parseChain(t, got.Status.CertificateChain) {
		der = append(der, c.Raw...)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	svid, err := x509svid.ParseRaw(der, keyDER)
	if err != nil {
		t.Fatalf("the pod's certificate and key are no X509-SVID: %v", err)
	}
	return svid
}

// tlsVersion names a TLS version.
func tlsVersion(v uint16) string {
	return map[uint16]string{0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}[v]
}
