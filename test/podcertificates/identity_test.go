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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestIdentityRules: the signer issues no identity SPIRE would not give a workload (a path
// under /spire, which SPIRE keeps for its agents and servers), not its own SPIFFE ID, and no
// admin or downstream identity unless the config allows it. With no ttl on the ClusterSPIFFEID,
// a certificate lives SPIRE's default X509-SVID TTL of an hour, not the day the kubelet asks.
func TestIdentityRules(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	w.startReady(t)
	selecting := func(app, template string, mutate func(*spirev1alpha1.ClusterSPIFFEIDSpec)) spirev1alpha1.ClusterSPIFFEIDSpec {
		spec := spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: template,
			PodSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		}
		if mutate != nil {
			mutate(&spec)
		}
		return spec
	}
	saTemplate := "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"
	w.createClusterSPIFFEID(t, "agentlike", selecting("agentlike", "spiffe://{{ .TrustDomain }}/spire/agent/k8s_psat/it/{{ .PodMeta.Name }}", nil))
	w.createClusterSPIFFEID(t, "self", selecting("self", registrarID, nil))
	w.createClusterSPIFFEID(t, "admin", selecting("admin", saTemplate, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.Admin = true }))
	w.createClusterSPIFFEID(t, "downstream", selecting("downstream", saTemplate, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.Downstream = true }))
	w.createClusterSPIFFEID(t, "plain", selecting("plain", saTemplate, nil))
	for _, app := range []string{"agentlike", "self", "admin", "downstream", "plain"} {
		w.createPod(t, app+"-0", podOptions{serviceAccount: app, labels: map[string]string{"app": app}})
	}
	// SPIRE holds entries for the IDs it allows: then the informers hold the pods and
	// ClusterSPIFFEIDs. The others' denials are confirmed against the API server anyway.
	for _, app := range []string{"admin", "downstream", "plain"} {
		w.waitEntry(t, saID(app), true)
	}
	t.Logf("world ready in %s", time.Since(start).Round(time.Millisecond))

	for _, tc := range []struct {
		app, reason string
		says        []string
	}{
		{app: "agentlike", reason: "ReservedSPIFFEID", says: []string{`"spiffe://` + trustDomain + `/spire/agent/k8s_psat/it/agentlike-0"`, "under /spire"}},
		{app: "self", reason: "ReservedSPIFFEID", says: []string{`"` + registrarID + `"`, "the signer's own SPIFFE ID"}},
		{app: "admin", reason: "PrivilegedIdentity", says: []string{"ClusterSPIFFEID admin is admin", "podCertificates.allowAdminIdentities"}},
		{app: "downstream", reason: "PrivilegedIdentity", says: []string{"ClusterSPIFFEID downstream is downstream", "podCertificates.allowDownstreamIdentities"}},
	} {
		t.Run(tc.app, func(t *testing.T) {
			pod, err := w.admin.CoreV1().Pods(namespace).Get(t.Context(), tc.app+"-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pcr, _ := w.request(t, pod, realcluster.PodCertificateRequestOptions{})
			got := w.waitEnded(t, pcr)
			cond := meta.FindStatusCondition(got.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeDenied)
			if cond == nil || got.Status.CertificateChain != "" {
				t.Fatalf("request %s, want Denied: %+v", realcluster.PodCertificateRequestOutcome(got), got.Status.Conditions)
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

	t.Run("no ttl: SPIRE's default X509-SVID TTL", func(t *testing.T) {
		pod, err := w.admin.CoreV1().Pods(namespace).Get(t.Context(), "plain-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The volume asks nothing: kube-apiserver defaults maxExpirationSeconds to a day.
		pcr, _ := w.request(t, pod, realcluster.PodCertificateRequestOptions{})
		got := w.waitEnded(t, pcr)
		if o := realcluster.PodCertificateRequestOutcome(got); o != certificatesv1.PodCertificateRequestConditionTypeIssued {
			t.Fatalf("request %s, want Issued: %+v", o, got.Status.Conditions)
		}
		if *got.Spec.MaxExpirationSeconds != 86400 {
			t.Errorf("spec.maxExpirationSeconds %d, want kube-apiserver's default 86400", *got.Spec.MaxExpirationSeconds)
		}
		leaf := parseChain(t, got.Status.CertificateChain)[0]
		if life := leaf.NotAfter.Sub(leaf.NotBefore); life != time.Hour {
			t.Errorf("leaf valid for %s, want SPIRE's default X509-SVID TTL of 1h", life)
		}
		t.Logf("leaf valid %s to %s", leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
	})
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
