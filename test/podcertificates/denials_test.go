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
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestDenials makes requests the signer must never issue and checks that each is Denied, a
// final answer the kubelet reports on the pod, with the reason for it and a message that
// names the cause. They come from the pod's node, as NodeRestriction admits them; requests of
// other creators are in TestRegistrarWithoutTheNodeOnlyPolicy.
func TestDenials(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	w.startReady(t)
	ctx := t.Context()
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	w.createClusterSPIFFEID(t, "other", podIdentity("other"))
	web := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
	// Its volume names a ClusterSPIFFEID that does not select it.
	named := w.createPod(t, "web-1", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"},
		projection: func(p *corev1.PodCertificateProjection) {
			p.UserAnnotations = map[string]string{"spire.spiffe.io/clusterspiffeid": "other"}
		}})
	w.createPod(t, "other-0", podOptions{serviceAccount: "other", labels: map[string]string{"app": "other"}})
	lonely := w.createPod(t, "lonely", podOptions{})
	finished := w.createPod(t, "finished", podOptions{serviceAccount: "finished", labels: map[string]string{"app": "web"}})
	// Both ClusterSPIFFEIDs and the pods are in spire-registrar's informers once their
	// entries are in SPIRE; before, a request would be denied for the lag, not for its cause.
	w.waitEntry(t, saID("web"), true)
	w.waitEntry(t, saID("other"), true)
	w.waitEntry(t, saID("finished"), true)

	// The pod finished before its node asks: the entry controller dropping its entry is the
	// sign that the shared pod informer has seen the phase.
	if _, err := realcluster.SetPodPhase(ctx, w.admin, namespace, finished.Name, corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	w.waitEntry(t, saID("finished"), false)
	t.Logf("world ready in %s", time.Since(start).Round(time.Millisecond))

	// The control: web-0, asked for as its node asks by default, is issued; each case below
	// changes one thing.
	t.Run("control", func(t *testing.T) {
		pcr, _ := w.request(t, web, realcluster.PodCertificateRequestOptions{})
		if o := realcluster.PodCertificateRequestOutcome(w.waitEnded(t, pcr)); o != certificatesv1.PodCertificateRequestConditionTypeIssued {
			t.Fatalf("request for web-0 %s, want Issued", o)
		}
	})
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		opts realcluster.PodCertificateRequestOptions
		// reason is the Denied condition's; says are what its message must name.
		reason string
		says   []string
	}{
		{name: "an unknown unverifiedUserAnnotations key", pod: web,
			opts:   realcluster.PodCertificateRequestOptions{UnverifiedUserAnnotations: map[string]string{"example.com/colour": "blue"}},
			reason: certificatesv1.PodCertificateRequestConditionInvalidUserConfig,
			says:   []string{`"example.com/colour"`, "spire.spiffe.io/clusterspiffeid"}},
		{name: "a ClusterSPIFFEID named that does not select the pod", pod: named,
			reason: "ClusterSPIFFEIDNotApplicable",
			says:   []string{"ClusterSPIFFEID other does not select pod default/web-1"}},
		{name: "no ClusterSPIFFEID selects the pod", pod: lonely,
			reason: "NoIdentity",
			says:   []string{"no ClusterSPIFFEID selects pod default/lonely"}},
		{name: "an ECDSA P-521 key", pod: web,
			opts:   realcluster.PodCertificateRequestOptions{KeyType: realcluster.KeyTypeECDSAP521},
			reason: certificatesv1.PodCertificateRequestConditionUnsupportedKeyType,
			says:   []string{"ECDSA P-521", "ECDSA P-256"}},
		{name: "an Ed25519 key", pod: web,
			opts:   realcluster.PodCertificateRequestOptions{KeyType: realcluster.KeyTypeED25519},
			reason: certificatesv1.PodCertificateRequestConditionUnsupportedKeyType,
			says:   []string{"Ed25519", "ECDSA P-256"}},
		{name: "a pod that has succeeded", pod: finished,
			reason: "PodFinished",
			says:   []string{`"default"/"finished" has finished (phase Succeeded)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pcr, _ := w.request(t, tc.pod, tc.opts)
			got := w.waitEnded(t, pcr)
			cond := meta.FindStatusCondition(got.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeDenied)
			if cond == nil || cond.Status != "True" {
				t.Fatalf("request %s, want Denied: conditions %+v", realcluster.PodCertificateRequestOutcome(got), got.Status.Conditions)
			}
			if got.Status.CertificateChain != "" {
				t.Errorf("a denied request has a certificate chain")
			}
			if cond.Reason != tc.reason {
				t.Errorf("reason %s, want %s (message %q)", cond.Reason, tc.reason, cond.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(cond.Message, s) {
					t.Errorf("message %q does not say %q", cond.Message, s)
				}
			}
			t.Logf("Denied, %s: %s", cond.Reason, cond.Message)
		})
	}
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
