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
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// fullReach is all that templates can see of pods and nodes but managedFields: what a cache
// keeps of them when it cannot tell which ClusterSPIFFEIDs will read what.
var fullReach = render.FullReach()

// Trim keeps of each object what the controllers read: of pods and nodes all that templates
// can see but managedFields (render.FullReach), and of pods also their phase and PodScheduled
// condition; of namespaces their labels; of EndpointSlices their Service and endpoints'
// targets and conditions; of PodCertificateRequests that have ended, all but their stub CSR
// and certificate chain; of every other object all but managedFields. A running pod's status
// and managedFields are often larger than the rest of it, and at tens of thousands of pods
// the caches are most of the process's memory. It is the transform of informer factories
// that other controllers may share, which need pods whole: an embedding binary whose own
// controllers need more should pass factories of its own.
func Trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return render.ProjectPod(o, fullReach), nil
	case *corev1.Node:
		return render.ProjectNode(o, fullReach), nil
	case *corev1.Namespace:
		return render.ProjectNamespace(o), nil
	case *discoveryv1.EndpointSlice:
		return render.ProjectEndpointSlice(o), nil
	case *certificatesv1.PodCertificateRequest:
		return trimPodCertificateRequest(o), nil
	}
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// trimPodCertificateRequest drops managedFields, and of a request that has ended (Issued,
// Denied or Failed) its stub CSR and certificate chain: up to 110 KiB a request that the
// signer never reads again.
func trimPodCertificateRequest(req *certificatesv1.PodCertificateRequest) *certificatesv1.PodCertificateRequest {
	req.ManagedFields = nil
	for _, c := range req.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			req.Spec.StubPKCS10Request, req.Status.CertificateChain = nil, ""
		}
	}
	return req
}
