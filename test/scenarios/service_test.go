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

package scenarios

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	servicePods = 300
	// scaledPods is what the Deployment is scaled down to: fewer than a slice holds (100),
	// so that kube-controller-manager drops or shrinks slices.
	scaledPods = 80
)

// TestServiceDNSNames puts a Service over a Deployment of 300 pods, more than one
// EndpointSlice holds: with autoPopulateDNSNames every pod's entry gets the Service's DNS
// names from the slices kube-controller-manager writes. Scaled down, the pods that leave
// lose their entries and the others keep their names.
func TestServiceDNSNames(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "service", true)
	ctx := t.Context()
	wantNames := []string{"web", "web.service", "web.service.svc", "web.service.svc." + clusterDomain}
	checkNames := func(entries []entry, want int) {
		t.Helper()
		if len(entries) != want {
			t.Errorf("%d entries, want %d", len(entries), want)
		}
		for _, e := range entries {
			if diff := cmp.Diff(wantNames, e.DNSNames); diff != "" {
				t.Errorf("DNS names of the entry of %s (-want +got):\n%s", e.Selectors, diff)
			}
		}
	}

	start := time.Now()
	s.createService("web", map[string]string{"app": "web"})
	s.createDeployment(s.deployment("web", servicePods))
	s.waitRunning("app=web", servicePods)
	t.Logf("Deployment of %d replicas running after %s", servicePods, time.Since(start).Round(time.Millisecond))
	nSlices := s.waitSliceEndpoints("web", servicePods, true)
	if nSlices < 2 {
		t.Fatalf("%d pods in %d EndpointSlice, want them spread over several", servicePods, nSlices)
	}
	t.Logf("%d EndpointSlices list the %d pods %s after the Deployment was created", nSlices, servicePods, time.Since(start).Round(time.Millisecond))
	checkNames(s.logExact("the Deployment was created", start), servicePods)

	start = time.Now()
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "web"}, Spec: autoscalingv1.ScaleSpec{Replicas: scaledPods}}
	if _, err := s.client.AppsV1().Deployments(s.ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitRunning("app=web", scaledPods)
	nSlices = s.waitSliceEndpoints("web", scaledPods, true)
	t.Logf("scaled down to %d pods in %d EndpointSlices after %s", scaledPods, nSlices, time.Since(start).Round(time.Millisecond))
	checkNames(s.logExact("the Deployment was scaled down", start), scaledPods)
}
