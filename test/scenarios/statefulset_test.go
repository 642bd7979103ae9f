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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestStatefulSetPodRecreated deletes a StatefulSet's pod, which the StatefulSet recreates
// under the same name with a new UID: the new pod has its own entry and the old one is gone.
func TestStatefulSetPodRecreated(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "statefulset", false)
	const replicas = 3
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](replicas),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			ServiceName: "db",
			Template:    s.podTemplate(labels),
		},
	}
	start := time.Now()
	if _, err := s.client.AppsV1().StatefulSets(s.ns).Create(t.Context(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := s.waitRunning("app=db", replicas)
	t.Logf("StatefulSet of %d pods running after %s", replicas, time.Since(start).Round(time.Millisecond))
	s.logExact("the StatefulSet was created", start)

	const victim = "db-0"
	var old *corev1.Pod
	for i := range pods {
		if pods[i].Name == victim {
			old = &pods[i]
		}
	}
	if old == nil {
		t.Fatalf("no pod %s among %d", victim, len(pods))
	}
	start = time.Now()
	if err := s.client.CoreV1().Pods(s.ns).Delete(t.Context(), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var recreated *corev1.Pod
	s.waitPods("app=db", replicas, func(p *corev1.Pod) bool {
		if p.Name == victim && p.UID != old.UID && running(p) {
			recreated = p.DeepCopy()
		}
		return running(p) && !(p.Name == victim && p.UID == old.UID)
	})
	t.Logf("pod %s recreated with UID %s (was %s) after %s", victim, recreated.UID, old.UID, time.Since(start).Round(time.Millisecond))
	entries := s.logExact("pod "+victim+" was deleted", start)
	found := false
	for _, e := range entries {
		found = found || e.Selectors[0] == podUIDSelector+string(recreated.UID)
	}
	if !found {
		t.Errorf("no entry for the recreated pod %s (%s)", victim, recreated.UID)
	}
}
