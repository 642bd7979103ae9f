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

package examples_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

const (
	// podCertificatesFile is the pod certificates example.
	podCertificatesFile = "pod-certificates.yaml"
	// podCertificateSigner is the signer spire-registrar signs pod certificates as by default.
	podCertificateSigner = "spire.spiffe.io/x509-svid"
	// namespaceNameLabel is the label kube-apiserver gives every namespace: its name.
	namespaceNameLabel = "kubernetes.io/metadata.name"
)

// TestExamplesPodCertificates checks, offline, what pod-certificates.yaml's comments promise: the
// ClusterSPIFFEID selects the Deployment's pods, whose one projected volume asks
// spire.spiffe.io/x509-svid for an X509-SVID in one credential bundle and mounts every
// ClusterTrustBundle of that signer, with no CSI or hostPath volume, and whose files only the
// workload's user reads. TestExamplesReconcile applies it to a real kube-apiserver.
func TestExamplesPodCertificates(t *testing.T) {
	var (
		clusterSPIFFEID *spirev1alpha1.ClusterSPIFFEID
		deployment      *appsv1.Deployment
		serviceAccount  *corev1.ServiceAccount
	)
	for _, d := range readExamples(t) {
		if d.file != podCertificatesFile {
			continue
		}
		switch d.obj.GetKind() {
		case kindClusterSPIFFEID:
			clusterSPIFFEID = decodeStrict[spirev1alpha1.ClusterSPIFFEID](t, d)
		case "Deployment":
			deployment = decodeStrict[appsv1.Deployment](t, d)
		case "ServiceAccount":
			serviceAccount = decodeStrict[corev1.ServiceAccount](t, d)
		}
	}
	if clusterSPIFFEID == nil || deployment == nil || serviceAccount == nil {
		t.Fatalf("%s lacks a ClusterSPIFFEID, a Deployment or a ServiceAccount", podCertificatesFile)
	}
	pod := &deployment.Spec.Template

	// The identity applies to the Deployment's pods, which run as the ServiceAccount.
	podSelector := clusterSPIFFEID.Spec.PodSelector
	if podSelector == nil || len(podSelector.MatchExpressions) > 0 ||
		!labels.SelectorFromSet(podSelector.MatchLabels).Matches(labels.Set(pod.Labels)) {
		t.Errorf("ClusterSPIFFEID podSelector %+v does not select the pods labelled %v", podSelector, pod.Labels)
	}
	if nsSelector := clusterSPIFFEID.Spec.NamespaceSelector; nsSelector == nil ||
		!cmp.Equal(nsSelector.MatchLabels, map[string]string{namespaceNameLabel: deployment.Namespace}) {
		t.Errorf("ClusterSPIFFEID namespaceSelector %+v, want the Deployment's namespace %s by its name label", nsSelector, deployment.Namespace)
	}
	if pod.Spec.ServiceAccountName != serviceAccount.Name || deployment.Namespace != serviceAccount.Namespace {
		t.Errorf("the pods run as %s/%s, the example's ServiceAccount is %s/%s",
			deployment.Namespace, pod.Spec.ServiceAccountName, serviceAccount.Namespace, serviceAccount.Name)
	}

	// One projected volume, two sources, and nothing that needs a node agent or a host path.
	var projected []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if v.CSI != nil || v.HostPath != nil {
			t.Errorf("volume %s needs a CSI driver or the host's filesystem", v.Name)
		}
		if v.Projected != nil {
			projected = append(projected, v)
		}
	}
	if len(projected) != 1 || len(projected[0].Projected.Sources) != 2 {
		t.Fatalf("projected volumes %+v, want one with two sources", projected)
	}
	sources := projected[0].Projected.Sources
	wantSVID := &corev1.PodCertificateProjection{
		SignerName: podCertificateSigner, KeyType: "ECDSAP256", MaxExpirationSeconds: ptr.To[int32](86400), CredentialBundlePath: "credentials.pem",
	}
	if diff := cmp.Diff(wantSVID, sources[0].PodCertificate); diff != "" {
		t.Errorf("podCertificate source (-want +got):\n%s", diff)
	}
	// An empty label selector selects every bundle of the signer; a missing one selects none.
	wantBundle := &corev1.ClusterTrustBundleProjection{SignerName: ptr.To(podCertificateSigner), LabelSelector: &metav1.LabelSelector{}, Path: "bundle.pem"}
	if diff := cmp.Diff(wantBundle, sources[1].ClusterTrustBundle); diff != "" {
		t.Errorf("clusterTrustBundle source (-want +got):\n%s", diff)
	}
	for _, c := range pod.Spec.Containers {
		mounted := false
		for _, m := range c.VolumeMounts {
			if m.Name == projected[0].Name {
				mounted = true
				if !m.ReadOnly {
					t.Errorf("container %s mounts %s writable", c.Name, m.Name)
				}
			}
		}
		if !mounted {
			t.Errorf("container %s does not mount %s", c.Name, projected[0].Name)
		}
		// The kubelet writes the key with mode 0600, owned by the pods' user, only when every
		// container runs as the same user.
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			t.Errorf("container %s sets its own runAsUser; the pod's must hold for all", c.Name)
		}
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("the pod sets no non-root runAsUser: the kubelet would write the key readable by all (0644)")
	}
}
