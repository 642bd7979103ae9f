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

package app

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/informercache"
)

// registerEndpointsAsSlicesInformer makes the factory's EndpointSlice informer read v1
// Endpoints instead, each converted to the one EndpointSlice that lists the same pods (see
// sliceOfEndpoints), so the controllers work unchanged with RBAC that grants only Endpoints.
// That is what spire-controller-manager reads, so DNS names come out as it makes them.
func registerEndpointsAsSlicesInformer(factory informers.SharedInformerFactory, namespace string, tweak func(*metav1.ListOptions)) {
	factory.InformerFor(&discoveryv1.EndpointSlice{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
				tweak(&options)
				list, err := client.CoreV1().Endpoints(namespace).List(ctx, options)
				if err != nil {
					return nil, err
				}
				out := &discoveryv1.EndpointSliceList{ListMeta: list.ListMeta}
				for i := range list.Items {
					out.Items = append(out.Items, *sliceOfEndpoints(&list.Items[i]))
				}
				return out, nil
			},
			WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
				tweak(&options)
				w, err := client.CoreV1().Endpoints(namespace).Watch(ctx, options)
				if err != nil {
					return nil, err
				}
				return watch.Filter(w, func(in watch.Event) (watch.Event, bool) {
					//nolint:staticcheck // v1 Endpoints are what the chart's RBAC grants and spire-controller-manager reads.
					if ep, ok := in.Object.(*corev1.Endpoints); ok {
						slice := sliceOfEndpoints(ep)
						if in.Type == watch.Bookmark {
							// The end of a watch-list's initial events is marked by an annotation.
							slice.Annotations = ep.Annotations
						}
						in.Object = slice
					}
					return in, true
				}), nil
			},
		}
		return informercache.NewRelistableInformer(lw, &discoveryv1.EndpointSlice{}, resync, namespaceIndexers)
	})
}

// sliceOfEndpoints is the EndpointSlice of a Service that lists the pods its v1 Endpoints list:
// ready addresses as ready endpoints, not-ready addresses as not ready (and not terminating,
// so that they still count, as Endpoints count them).
//
//nolint:staticcheck // v1 Endpoints are what the chart's RBAC grants and spire-controller-manager reads.
func sliceOfEndpoints(ep *corev1.Endpoints) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: ep.Name, Namespace: ep.Namespace, UID: ep.UID, ResourceVersion: ep.ResourceVersion,
			Labels: map[string]string{discoveryv1.LabelServiceName: ep.Name},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	add := func(addresses []corev1.EndpointAddress, ready bool) {
		for _, a := range addresses {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{a.IP},
				TargetRef:  a.TargetRef,
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Terminating: ptr.To(false)},
			})
		}
	}
	for _, subset := range ep.Subsets {
		add(subset.Addresses, true)
		add(subset.NotReadyAddresses, false)
	}
	return slice
}
