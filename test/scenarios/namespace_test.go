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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const namespacePods = 100

// TestNamespaceDeleted deletes a namespace with 100 running pods in it: kube-controller-manager
// deletes the pods, kwok finishes their graceful deletes, and all their entries go.
func TestNamespaceDeleted(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "doomed", false)
	start := time.Now()
	s.createDeployment(s.deployment("web", namespacePods))
	s.waitRunning("app=web", namespacePods)
	if entries := s.logExact("the Deployment was created", start); len(entries) != namespacePods {
		t.Fatalf("%d entries, want %d", len(entries), namespacePods)
	}

	start = time.Now()
	if err := s.client.CoreV1().Namespaces().Delete(t.Context(), s.ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitPods("", 0, running)
	t.Logf("the namespace's pods gone %s after it was deleted", time.Since(start).Round(time.Millisecond))
	entries := s.logExact("the namespace was deleted", start)
	if len(entries) != 0 {
		t.Errorf("%d entries after the namespace was deleted, want none", len(entries))
	}
}
