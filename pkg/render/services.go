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

package render

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// SlicePods returns the "namespace/name" of every pod a slice targets, ready or not.
func SlicePods(slice *discoveryv1.EndpointSlice) []string {
	var pods []string
	for _, ep := range slice.Endpoints {
		if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" && ref.Name != "" {
			ns := ref.Namespace
			if ns == "" {
				ns = slice.Namespace
			}
			pods = append(pods, ns+"/"+ref.Name)
		}
	}
	return pods
}

// ServiceOf returns the name of the Service a slice belongs to, or "".
func ServiceOf(slice *discoveryv1.EndpointSlice) string {
	return slice.Labels[discoveryv1.LabelServiceName]
}

// ServicesOfPod returns, sorted, the names of the Services whose slices in the pod's namespace
// list the pod as v1 Endpoints would list it, which is what spire-controller-manager reads:
// an endpoint whose target is this pod (by UID when the slice names one, so a pod that reuses
// a name is not taken for its predecessor), ready or not, but not one that is terminating
// and not ready, which the Endpoints controller leaves out.
func ServicesOfPod(endpointSlices []*discoveryv1.EndpointSlice, pod *corev1.Pod) []string {
	var services []string
	for _, slice := range endpointSlices {
		if slice.Namespace != pod.Namespace || !sliceListsPod(slice, pod) {
			continue
		}
		if svc := ServiceOf(slice); svc != "" {
			services = append(services, svc)
		}
	}
	slices.Sort(services)
	return slices.Compact(services)
}

func sliceListsPod(slice *discoveryv1.EndpointSlice, pod *corev1.Pod) bool {
	for _, ep := range slice.Endpoints {
		ref := ep.TargetRef
		if ref == nil || ref.Kind != "Pod" || ref.Name != pod.Name || (ref.Namespace != "" && ref.Namespace != pod.Namespace) {
			continue
		}
		if (ref.UID == "" || ref.UID == pod.UID) && listedInEndpoints(ep) {
			return true
		}
	}
	return false
}

// listedInEndpoints reports whether v1 Endpoints list an endpoint, as a ready or a not-ready
// address: they leave out only terminating pods that are not ready (the slice marks those
// served with publishNotReadyAddresses as ready).
func listedInEndpoints(ep discoveryv1.Endpoint) bool {
	ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
	terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
	return ready || !terminating
}

// SliceListedPods returns "namespace/name/uid" for every pod the slice lists as v1 Endpoints
// would: a change to it changes the DNS names of those pods.
func SliceListedPods(slice *discoveryv1.EndpointSlice) []string {
	var pods []string
	for _, ep := range slice.Endpoints {
		if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" && ref.Name != "" && listedInEndpoints(ep) {
			ns := ref.Namespace
			if ns == "" {
				ns = slice.Namespace
			}
			pods = append(pods, ns+"/"+ref.Name+"/"+string(ref.UID))
		}
	}
	slices.Sort(pods)
	return pods
}

// ServiceDNSNames are the names a pod is reachable by through its Services, as
// spire-controller-manager's autoPopulateDNSNames produces them, sorted.
func ServiceDNSNames(services []string, namespace, clusterDomain string) []string {
	var names []string
	for _, svc := range services {
		names = append(names, svc, svc+"."+namespace, svc+"."+namespace+".svc")
		if clusterDomain != "" {
			names = append(names, svc+"."+namespace+".svc."+clusterDomain)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
