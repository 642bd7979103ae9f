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

package entry_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// TestAutoPopulateDNSNamesFollowsEndpointSlices checks that a pod's entry gets the DNS names of
// the Services whose EndpointSlices target it, and loses them when a slice stops targeting it.
// No endpointslice controller runs here, so the test writes the slices itself.
func TestAutoPopulateDNSNamesFollowsEndpointSlices(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("svc", nil)
	node := e.node("node")
	pod := e.pod(ns, "web-0", node.Name, map[string]string{"app": "web"})
	e.clusterSPIFFEID("web", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:     "spiffe://{{ .TrustDomain }}/{{ .PodMeta.Name }}",
		NamespaceSelector:    sel(map[string]string{"kubernetes.io/metadata.name": ns}),
		DNSNameTemplates:     []string{"web-0.example.com"},
		AutoPopulateDNSNames: true,
	})
	e.startController("clusterDomain: cluster.local\n")
	e.waitForSPIFFEIDs("spiffe://example.org/web-0")

	slice := func(name, service string, ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.0.0.10"},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID},
			}},
		}
	}
	sliceClient := e.kube.DiscoveryV1().EndpointSlices(ns)
	if _, err := sliceClient.Create(e.ctx, slice("web-abc", "web", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A not-ready endpoint counts too: the name must work before the pod turns ready.
	if _, err := sliceClient.Create(e.ctx, slice("api-abc", "api", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"web-0.example.com",
		"api", "api." + ns, "api." + ns + ".svc", "api." + ns + ".svc.cluster.local",
		"web", "web." + ns, "web." + ns + ".svc", "web." + ns + ".svc.cluster.local"}
	dnsNames := func() []string {
		for _, en := range e.entries() {
			return en.GetDnsNames()
		}
		return nil
	}
	e.eventually("service DNS names "+strings.Join(want, ","), 30*time.Second, func() (bool, error) {
		return slices.Equal(dnsNames(), want), nil
	})

	if err := sliceClient.Delete(e.ctx, "api-abc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want = []string{"web-0.example.com", "web", "web." + ns, "web." + ns + ".svc", "web." + ns + ".svc.cluster.local"}
	e.eventually("api names gone", 30*time.Second, func() (bool, error) { return slices.Equal(dnsNames(), want), nil })
}
