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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

func TestTrimKeepsWhatTemplatesAndControllersSee(t *testing.T) {
	trim := NewTrim()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", Labels: map[string]string{"zone": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}, Spec: corev1.NodeSpec{ProviderID: "p"},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
	wantNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", Labels: map[string]string{"zone": "a"}},
		Spec: corev1.NodeSpec{ProviderID: "p"}}
	out, _ := trim(node)
	if diff := cmp.Diff(wantNode, out); diff != "" {
		t.Errorf("trimmed node (-want +got):\n%s", diff)
	}

	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", UID: "u", ResourceVersion: "3", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"big": strings.Repeat("x", 100)}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
	}
	wantNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", UID: "u", ResourceVersion: "3", Labels: map[string]string{"team": "a"}}}
	out, _ = trim(ns)
	if diff := cmp.Diff(wantNS, out); diff != "" {
		t.Errorf("trimmed namespace (-want +got):\n%s", diff)
	}

	inputClusterSPIFFEID := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "t"}}
	out, _ = trim(inputClusterSPIFFEID)
	if got := out.(*spirev1alpha1.ClusterSPIFFEID); got.ManagedFields != nil || got.Spec.SPIFFEIDTemplate != "t" {
		t.Errorf("trimmed ClusterSPIFFEID wrongly: %+v", got)
	}
}

// TestTrimmedEndpointSliceGivesTheSameServices: what the controllers read of a slice is the
// same before and after trimming.
func TestTrimmedEndpointSliceGivesTheSameServices(t *testing.T) {
	target := func(name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Namespace: "prod", Name: name}
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "prod", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, TargetRef: target("web-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.0.0.2"}, TargetRef: target("web-1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http")}},
	}
	out, _ := NewTrim()(slice.DeepCopy())
	trimmed := out.(*discoveryv1.EndpointSlice)
	if trimmed.Endpoints[0].Addresses != nil || trimmed.Ports != nil || len(trimmed.Labels) != 1 {
		t.Errorf("the trimmed slice keeps what nothing reads: %+v", trimmed)
	}
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name}}
		if diff := cmp.Diff(render.ServicesOfPod([]*discoveryv1.EndpointSlice{slice}, pod),
			render.ServicesOfPod([]*discoveryv1.EndpointSlice{trimmed}, pod)); diff != "" {
			t.Errorf("ServicesOfPod of %s changed by trimming (-whole +trimmed):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(render.SliceListedPods(slice), render.SliceListedPods(trimmed)); diff != "" {
		t.Errorf("SliceListedPods changed by trimming (-whole +trimmed):\n%s", diff)
	}
	if diff := cmp.Diff(render.SlicePods(slice), render.SlicePods(trimmed)); diff != "" {
		t.Errorf("SlicePods changed by trimming (-whole +trimmed):\n%s", diff)
	}
}

func TestTrimDropsWhatEndedPodCertificateRequestsNoLongerNeed(t *testing.T) {
	trim := NewTrim()
	pending := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "req-1", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec:       certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s", StubPKCS10Request: []byte("csr")},
	}
	out, _ := trim(pending.DeepCopy())
	if got := out.(*certificatesv1.PodCertificateRequest); string(got.Spec.StubPKCS10Request) != "csr" || got.ManagedFields != nil {
		t.Errorf("trimmed pending request: %+v, want its CSR kept and managedFields dropped", got)
	}
	issued := pending.DeepCopy()
	issued.Status = certificatesv1.PodCertificateRequestStatus{CertificateChain: "chain",
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue}}}
	out, _ = trim(issued)
	if got := out.(*certificatesv1.PodCertificateRequest); got.Spec.StubPKCS10Request != nil || got.Status.CertificateChain != "" ||
		len(got.Status.Conditions) != 1 || got.Spec.SignerName != "example.com/s" {
		t.Errorf("trimmed issued request: %+v, want no CSR and no chain, the rest kept", got)
	}
}
