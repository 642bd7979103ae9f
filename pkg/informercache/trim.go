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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// NewTrim returns the transform of an informer factory: it keeps of each object what the
// controllers and templates read, and of a pod render.CachedPod, as a *corev1.Pod whose maps
// pods with the same ones share (see trimmer.trim). At tens of thousands of pods the caches
// are most of the process's memory. Each transform owns the maps its pods share, so give each
// factory its own. A binary whose own controllers need more of these objects should give them
// factories of their own.
func NewTrim() cache.TransformFunc {
	t := &trimmer{maps: newMapInterner()}
	return t.trim
}

type trimmer struct {
	maps *mapInterner
}

// trim keeps of pods what trimmer.pod keeps; of nodes all that templates can see but
// managedFields; of namespaces what selectors read, their labels; of EndpointSlices their
// Service and endpoints' targets and conditions; of PodCertificateRequests that have ended,
// all but their stub CSR and certificate chain; of every other object all but managedFields.
func (t *trimmer) trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return t.pod(o), nil
	case *corev1.Node:
		meta := o.ObjectMeta
		meta.ManagedFields = nil
		return &corev1.Node{ObjectMeta: meta, Spec: o.Spec}, nil
	case *corev1.Namespace:
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion, Labels: o.Labels, DeletionTimestamp: o.DeletionTimestamp,
		}}, nil
	case *discoveryv1.EndpointSlice:
		return trimEndpointSlice(o), nil
	case *certificatesv1.PodCertificateRequest:
		return trimPodCertificateRequest(o), nil
	}
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// trimEndpointSlice keeps of a slice what render.ServicesOfPod, SlicePods and SliceListedPods
// read: its Service label and its endpoints' targets and conditions.
func trimEndpointSlice(slice *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
		Name: slice.Name, Namespace: slice.Namespace, UID: slice.UID, ResourceVersion: slice.ResourceVersion,
		DeletionTimestamp: slice.DeletionTimestamp,
	}}
	if svc, ok := slice.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	}
	if len(slice.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, len(slice.Endpoints))
		for i, ep := range slice.Endpoints {
			out.Endpoints[i] = discoveryv1.Endpoint{
				TargetRef:  ep.TargetRef,
				Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready, Terminating: ep.Conditions.Terminating},
			}
		}
	}
	return out
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
