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

package informercache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

func TestTrimKeepsWhatTemplatesAndControllersSee(t *testing.T) {
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(100, 0)}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, scheduled},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "img"}}},
	}
	want := pod.DeepCopy()
	want.ManagedFields = nil
	want.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{scheduled}}
	out, err := Trim(pod)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("trimmed pod (-want +got):\n%s", diff)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", Labels: map[string]string{"zone": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}, Spec: corev1.NodeSpec{ProviderID: "p"},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
	wantNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", Labels: map[string]string{"zone": "a"}},
		Spec: corev1.NodeSpec{ProviderID: "p"}}
	out, _ = Trim(node)
	if diff := cmp.Diff(wantNode, out); diff != "" {
		t.Errorf("trimmed node (-want +got):\n%s", diff)
	}

	inputClusterSPIFFEID := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "t"}}
	out, _ = Trim(inputClusterSPIFFEID)
	if got := out.(*spirev1alpha1.ClusterSPIFFEID); got.ManagedFields != nil || got.Spec.SPIFFEIDTemplate != "t" {
		t.Errorf("trimmed ClusterSPIFFEID wrongly: %+v", got)
	}
}

func TestTrimDropsWhatEndedPodCertificateRequestsNoLongerNeed(t *testing.T) {
	pending := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "req-1", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec:       certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s", StubPKCS10Request: []byte("csr")},
	}
	out, _ := Trim(pending.DeepCopy())
	if got := out.(*certificatesv1.PodCertificateRequest); string(got.Spec.StubPKCS10Request) != "csr" || got.ManagedFields != nil {
		t.Errorf("trimmed pending request: %+v, want its CSR kept and managedFields dropped", got)
	}
	issued := pending.DeepCopy()
	issued.Status = certificatesv1.PodCertificateRequestStatus{CertificateChain: "chain",
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue}}}
	out, _ = Trim(issued)
	if got := out.(*certificatesv1.PodCertificateRequest); got.Spec.StubPKCS10Request != nil || got.Status.CertificateChain != "" ||
		len(got.Status.Conditions) != 1 || got.Spec.SignerName != "example.com/s" {
		t.Errorf("trimmed issued request: %+v, want no CSR and no chain, the rest kept", got)
	}
}
