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

package explain

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

const testSigner = "spire.spiffe.io/x509-svid"

// certPod is testPod with a projected volume "svid" holding a podCertificate source of
// signer.
func certPod(signer string) PodInput {
	in := testPod()
	in.Pod.Spec.Volumes = []corev1.Volume{{Name: "svid", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer, KeyType: "ECDSAP256"}}},
	}}}}
	return in
}

// podRequest is a request of testPod for signer, created age minutes after the epoch, with
// the condition given (none: pending).
func podRequest(name string, age int, signer string, condition *metav1.Condition, chainPEM string) *certificatesv1.PodCertificateRequest {
	r := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute))},
		Spec:       certificatesv1.PodCertificateRequestSpec{SignerName: signer, PodName: "web", PodUID: "pod-uid", NodeName: "n1", NodeUID: k8stypes.UID("node-uid")},
		Status:     certificatesv1.PodCertificateRequestStatus{CertificateChain: chainPEM},
	}
	if condition != nil {
		r.Status.Conditions = []metav1.Condition{*condition}
	}
	return r
}

// leafPEM is a certificate for SPIFFE ID id, in PEM.
func leafPEM(t *testing.T, id string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), URIs: []*url.URL{u}, NotBefore: epoch, NotAfter: epoch.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestPodCertificates: for each state of a pod's certificate volume, explain says the
// request's outcome, the certificate's SPIFFE ID and the ClusterSPIFFEID that gives it, or
// what the signer would decide now, and why.
func TestPodCertificates(t *testing.T) {
	x := testExplainer(t, "podCertificates: {enabled: true}\n")
	web := clusterSPIFFEID("web", 1)
	denied := &metav1.Condition{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue, Reason: "NoIdentity", Message: "no ClusterSPIFFEID selects pod app/web"}
	issued := &metav1.Condition{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "Issued"}
	for _, tc := range []struct {
		name     string
		signer   string
		csids    []*spirev1alpha1.ClusterSPIFFEID
		requests func(t *testing.T) []*certificatesv1.PodCertificateRequest
		want     PodCertificate
		summary  string
	}{
		{
			name: "issued, newest request", signer: testSigner, csids: []*spirev1alpha1.ClusterSPIFFEID{web},
			requests: func(t *testing.T) []*certificatesv1.PodCertificateRequest {
				return []*certificatesv1.PodCertificateRequest{
					podRequest("old", 1, testSigner, denied, ""),
					podRequest("new", 2, testSigner, issued, leafPEM(t, "spiffe://example.org/ns/app/sa/web")),
				}
			},
			want: PodCertificate{Request: "app/new", State: CertificateIssued, Reason: "Issued",
				Certificate: &IssuedCertificate{SPIFFEID: "spiffe://example.org/ns/app/sa/web", NotAfter: "2026-01-01T01:00:00Z", ClusterSPIFFEID: "web"}},
			summary: "Issued spiffe://example.org/ns/app/sa/web from ClusterSPIFFEID web",
		},
		{
			name: "denied", signer: testSigner,
			requests: func(*testing.T) []*certificatesv1.PodCertificateRequest {
				return []*certificatesv1.PodCertificateRequest{podRequest("r", 1, testSigner, denied, "")}
			},
			want:    PodCertificate{Request: "app/r", State: CertificateDenied, Reason: "NoIdentity", Message: denied.Message},
			summary: "Denied (NoIdentity): no ClusterSPIFFEID selects pod app/web. The kubelet does not ask again",
		},
		{
			name: "pending, with an identity", signer: testSigner, csids: []*spirev1alpha1.ClusterSPIFFEID{web},
			requests: func(*testing.T) []*certificatesv1.PodCertificateRequest {
				return []*certificatesv1.PodCertificateRequest{podRequest("r", 1, testSigner, nil, "")}
			},
			want:    PodCertificate{Request: "app/r", State: CertificatePending},
			summary: "Waiting for the signer; it would issue spiffe://example.org/ns/app/sa/web from ClusterSPIFFEID web.",
		},
		{
			name: "pending, a ClusterSPIFFEID of another class", signer: testSigner,
			csids: []*spirev1alpha1.ClusterSPIFFEID{clusterSPIFFEID("other", 1, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.ClassName = "other" })},
			requests: func(*testing.T) []*certificatesv1.PodCertificateRequest {
				return []*certificatesv1.PodCertificateRequest{podRequest("r", 1, testSigner, nil, "")}
			},
			want:    PodCertificate{Request: "app/r", State: CertificatePending},
			summary: "it would not issue: no ClusterSPIFFEID of the class selects the pod (`explain pod` says why each does not): denied NoIdentity once the request has waited podCertificates.waitForIdentity (5m0s) for one.",
		},
		{
			name: "no request", signer: testSigner, csids: []*spirev1alpha1.ClusterSPIFFEID{web},
			requests: func(*testing.T) []*certificatesv1.PodCertificateRequest {
				return []*certificatesv1.PodCertificateRequest{podRequest("r", 1, "example.com/other", nil, "")}
			},
			want:    PodCertificate{State: CertificateNoRequest},
			summary: "No request yet; it would issue spiffe://example.org/ns/app/sa/web",
		},
		{
			name: "another signer's volume", signer: "example.com/other", csids: []*spirev1alpha1.ClusterSPIFFEID{web},
			requests: func(*testing.T) []*certificatesv1.PodCertificateRequest {
				return []*certificatesv1.PodCertificateRequest{podRequest("r", 1, "example.com/other", nil, "")}
			},
			want:    PodCertificate{Request: "app/r", State: CertificatePending},
			summary: "this spire-registrar does not sign for example.com/other",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := PodCertificateInput{PodInput: certPod(tc.signer), Requests: tc.requests(t)}
			in.ClusterSPIFFEIDs = tc.csids
			answers, err := x.PodCertificates(in, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(answers) != 1 {
				t.Fatalf("%d answers, want 1 for the one volume", len(answers))
			}
			got := answers[0]
			if got.Volume != "svid" || got.SignerName != tc.signer || got.Pod != "app/web" {
				t.Errorf("answer is for %s volume %s signer %s", got.Pod, got.Volume, got.SignerName)
			}
			if got.Request != tc.want.Request || got.State != tc.want.State || got.Reason != tc.want.Reason || got.Message != tc.want.Message {
				t.Errorf("request %q state %q reason %q message %q, want %q %q %q %q", got.Request, got.State, got.Reason, got.Message,
					tc.want.Request, tc.want.State, tc.want.Reason, tc.want.Message)
			}
			if (got.Certificate == nil) != (tc.want.Certificate == nil) || (got.Certificate != nil && (got.Certificate.SPIFFEID != tc.want.Certificate.SPIFFEID ||
				got.Certificate.ClusterSPIFFEID != tc.want.Certificate.ClusterSPIFFEID || got.Certificate.NotAfter != tc.want.Certificate.NotAfter)) {
				t.Errorf("certificate %+v, want %+v", got.Certificate, tc.want.Certificate)
			}
			if !strings.Contains(got.Summary, tc.summary) {
				t.Errorf("summary %q, want it to hold %q", got.Summary, tc.summary)
			}
			var text bytes.Buffer
			if err := WritePodCertificatesText(&text, answers); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "State:") || !strings.Contains(text.String(), got.Summary) {
				t.Errorf("text output lacks the state or the summary:\n%s", text.String())
			}
		})
	}
}

// TestPodCertificatesNamedClusterSPIFFEID: a request that names a ClusterSPIFFEID is
// explained with that one, as the signer decides it.
func TestPodCertificatesNamedClusterSPIFFEID(t *testing.T) {
	x := testExplainer(t, "podCertificates: {enabled: true}\n")
	req := podRequest("r", 1, testSigner, nil, "")
	req.Spec.UnverifiedUserAnnotations = map[string]string{"spire.spiffe.io/clusterspiffeid": "missing"}
	in := PodCertificateInput{PodInput: certPod(testSigner)}
	in.ClusterSPIFFEIDs = []*spirev1alpha1.ClusterSPIFFEID{clusterSPIFFEID("web", 1)}
	got := x.PodCertificateRequest(in, req)
	if got.Identity != nil || !strings.Contains(got.IdentityProblem, "ClusterSPIFFEID missing, which the request names") ||
		!strings.Contains(got.IdentityProblem, "ClusterSPIFFEIDNotApplicable") {
		t.Errorf("identity %+v, problem %q; want none, naming ClusterSPIFFEID missing and the denial", got.Identity, got.IdentityProblem)
	}
}

// TestPodCertificatesIdentityRules: explain says the signer would deny an admin identity
// unless the config allows it, an ID under /spire, and a pod being deleted, as the signer
// decides them.
func TestPodCertificatesIdentityRules(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		change       func(*PodCertificateInput)
		wantProblem  []string // empty: an identity
	}{
		{name: "admin", config: "podCertificates: {enabled: true}\n",
			change:      func(in *PodCertificateInput) { in.ClusterSPIFFEIDs[0].Spec.Admin = true },
			wantProblem: []string{"podCertificates.allowAdminIdentities", "denied PrivilegedIdentity"}},
		{name: "admin allowed", config: "podCertificates: {enabled: true, allowAdminIdentities: true}\n",
			change: func(in *PodCertificateInput) { in.ClusterSPIFFEIDs[0].Spec.Admin = true }},
		{name: "under /spire", config: "podCertificates: {enabled: true}\n",
			change: func(in *PodCertificateInput) {
				in.ClusterSPIFFEIDs[0].Spec.SPIFFEIDTemplate = "spiffe://{{ .TrustDomain }}/spire/agent/x"
			},
			wantProblem: []string{"under /spire", "denied ReservedSPIFFEID"}},
		{name: "being deleted", config: "podCertificates: {enabled: true}\n",
			change:      func(in *PodCertificateInput) { in.Pod.DeletionTimestamp = &metav1.Time{Time: epoch} },
			wantProblem: []string{"denied PodDeleting"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := testExplainer(t, tc.config)
			in := PodCertificateInput{PodInput: certPod(testSigner)}
			in.ClusterSPIFFEIDs = []*spirev1alpha1.ClusterSPIFFEID{clusterSPIFFEID("web", 1)}
			tc.change(&in)
			got := x.PodCertificateRequest(in, podRequest("r", 1, testSigner, nil, ""))
			if len(tc.wantProblem) == 0 {
				if got.Identity == nil {
					t.Fatalf("no identity: %q", got.IdentityProblem)
				}
				return
			}
			if got.Identity != nil {
				t.Fatalf("identity %+v, want none", got.Identity)
			}
			for _, want := range tc.wantProblem {
				if !strings.Contains(got.IdentityProblem, want) {
					t.Errorf("problem %q does not say %q", got.IdentityProblem, want)
				}
			}
		})
	}
}
