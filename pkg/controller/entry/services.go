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

package entry

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// endpointSlicePodIndex finds the EndpointSlices whose endpoints target a pod, by the pod's
// "namespace/name".
const endpointSlicePodIndex = "targetPod"

// indexEndpointSliceByPod indexes a slice under every pod its endpoints target, ready or not.
func indexEndpointSliceByPod(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	return slicePods(slice), nil
}

// slicePods returns the "namespace/name" of every pod a slice targets.
func slicePods(slice *discoveryv1.EndpointSlice) []string {
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

// serviceOf returns the name of the Service a slice belongs to, or "".
func serviceOf(slice *discoveryv1.EndpointSlice) string {
	return slice.Labels[discoveryv1.LabelServiceName]
}

// servicesOfPod returns the names of the Services whose slices target a pod.
func servicesOfPod(indexer cache.Indexer, namespace, name string) ([]string, error) {
	objs, err := indexer.ByIndex(endpointSlicePodIndex, namespace+"/"+name)
	if err != nil {
		return nil, err
	}
	var services []string
	for _, obj := range objs {
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok && slice.Namespace == namespace {
			if svc := serviceOf(slice); svc != "" {
				services = append(services, svc)
			}
		}
	}
	slices.Sort(services)
	return slices.Compact(services), nil
}

// serviceDNSNames are the names a pod is reachable by through its Services, as
// spire-controller-manager's autoPopulateDNSNames produces them, sorted.
func serviceDNSNames(services []string, namespace, clusterDomain string) []string {
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
