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
// target the pod.
func ServicesOfPod(endpointSlices []*discoveryv1.EndpointSlice, namespace, name string) []string {
	key := namespace + "/" + name
	var services []string
	for _, slice := range endpointSlices {
		if slice.Namespace != namespace || !slices.Contains(SlicePods(slice), key) {
			continue
		}
		if svc := ServiceOf(slice); svc != "" {
			services = append(services, svc)
		}
	}
	slices.Sort(services)
	return slices.Compact(services)
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
