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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// A Service's Endpoints, read as a slice, give the DNS names to the pods they list, ready or
// not, as spire-controller-manager reads them, and to no other pod.
func TestSliceOfEndpointsListsThePodsEndpointsList(t *testing.T) {
	ref := func(name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: name, UID: types.UID("uid-" + name)}
	}
	//nolint:staticcheck // v1 Endpoints are what is converted.
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", ResourceVersion: "42"},
		Subsets: []corev1.EndpointSubset{{
			Addresses:         []corev1.EndpointAddress{{IP: "10.0.0.1", TargetRef: ref("ready")}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.2", TargetRef: ref("starting")}},
		}},
	}
	slice := sliceOfEndpoints(ep)
	if slice.ResourceVersion != "42" || render.ServiceOf(slice) != "web" {
		t.Errorf("slice %s/%s rv %s of Service %q, want rv 42 of Service web", slice.Namespace, slice.Name, slice.ResourceVersion, render.ServiceOf(slice))
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)}}
	}
	for name, want := range map[string][]string{"ready": {"web"}, "starting": {"web"}, "other": nil} {
		if diff := cmp.Diff(want, render.ServicesOfPod([]*discoveryv1.EndpointSlice{slice}, pod(name))); diff != "" {
			t.Errorf("Services of pod %s (-want +got):\n%s", name, diff)
		}
	}
}
