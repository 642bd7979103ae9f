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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimForCacheKeepsWhatTemplatesSee(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "img"}}},
	}
	out, err := trimForCache(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if got.ManagedFields != nil || got.Status.PodIP != "" || got.Status.ContainerStatuses != nil {
		t.Errorf("not trimmed: %+v", got)
	}
	if got.Status.Phase != corev1.PodRunning || got.Labels["app"] != "web" || got.Spec.ServiceAccountName != "web" {
		t.Errorf("trimmed what entries depend on: %+v", got)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u"}, Spec: corev1.NodeSpec{ProviderID: "p"},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
	out, _ = trimForCache(node)
	if n := out.(*corev1.Node); n.Status.Images != nil || n.UID != "u" || n.Spec.ProviderID != "p" {
		t.Errorf("node trimmed wrongly: %+v", n)
	}
}
