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
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// spiffeIDTemplate is the one identity every scenario's pods get.
	spiffeIDTemplate = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"
	// podsTimeout bounds how long Kubernetes may take to bring pods to a state.
	podsTimeout = 2 * time.Minute
	podsPoll    = 200 * time.Millisecond
	cleanupWait = time.Minute
)

// activeNamespaces returns the namespaces scenarios run in, each with whether its
// ClusterSPIFFEID populates DNS names.
func (w *world) activeNamespaces() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.active)
}

// scenario is one test's namespace, selected by a ClusterSPIFFEID of its own.
type scenario struct {
	*world
	t  *testing.T
	ns string
}

// newScenario starts a scenario once the one before it has ended, so that scenarios take
// turns; only background scenarios overlap them. It creates the namespace and its
// ClusterSPIFFEID. When the test ends the ClusterSPIFFEID goes, the test waits for SPIRE to
// drop the namespace's entries, and the namespace is deleted without waiting.
func newScenario(t *testing.T, ns string, autoPopulateDNSNames bool) *scenario {
	t.Helper()
	w := sharedWorld(t)
	w.exclusive.Lock()
	t.Cleanup(w.exclusive.Unlock)
	return startScenario(t, w, ns, autoPopulateDNSNames)
}

// newBackgroundScenario starts a scenario that runs while others do: one that spends most
// of its time waiting for Kubernetes and touches nothing of theirs.
func newBackgroundScenario(t *testing.T, ns string, autoPopulateDNSNames bool) *scenario {
	t.Helper()
	return startScenario(t, sharedWorld(t), ns, autoPopulateDNSNames)
}

// startScenario creates the namespace and its ClusterSPIFFEID, and cleans up after the test.
func startScenario(t *testing.T, w *world, ns string, autoPopulateDNSNames bool) *scenario {
	t.Helper()
	ctx := t.Context()
	if err := realcluster.EnsureNamespace(ctx, w.client, ns); err != nil {
		t.Fatal(err)
	}
	if err := realcluster.WaitServiceAccount(ctx, w.client, ns, "default"); err != nil {
		t.Fatal(err)
	}
	clusterSPIFFEID := &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate:     spiffeIDTemplate,
			NamespaceSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			AutoPopulateDNSNames: autoPopulateDNSNames,
		},
	}
	if _, err := w.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, clusterSPIFFEID, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.active[ns] = autoPopulateDNSNames
	w.mu.Unlock()
	t.Cleanup(func() { w.endScenario(t, ns) })
	return &scenario{world: w, t: t, ns: ns}
}

// endScenario deletes the ClusterSPIFFEID, waits for its entries to go, and deletes the
// namespace.
func (w *world) endScenario(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupWait)
	defer cancel()
	if err := w.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete ClusterSPIFFEID %s: %v", ns, err)
	}
	prefix := namespacePrefix(ns)
	err := wait.PollUntilContextCancel(ctx, podsPoll, true, func(ctx context.Context) (bool, error) {
		list, err := w.spireEntries(ctx)
		if err != nil {
			return false, nil
		}
		for _, e := range list {
			if strings.HasPrefix(fromAPI(e).SPIFFEID, prefix) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("entries of %s still in SPIRE after its ClusterSPIFFEID was deleted: %v", ns, err)
	}
	w.mu.Lock()
	delete(w.active, ns)
	w.mu.Unlock()
	err = w.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", ns, err)
	}
}

// deployment is a Deployment of pods that run on kwok's nodes.
func (s *scenario) deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: s.podTemplate(labels),
		},
	}
	return d
}

func (s *scenario) podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: realcluster.PlaceholderImage}},
		},
	}
	realcluster.KwokPodSpec(&tmpl.Spec)
	return tmpl
}

func (s *scenario) createDeployment(d *appsv1.Deployment) {
	s.t.Helper()
	if _, err := s.client.AppsV1().Deployments(s.ns).Create(s.t.Context(), d, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// running reports whether a pod runs and serves: Running, Ready, with an IP, not terminating.
func running(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPods waits until exactly want pods match the selector and every one satisfies ok,
// and returns them.
func (s *scenario) waitPods(selector string, want int, ok func(*corev1.Pod) bool) []corev1.Pod {
	s.t.Helper()
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(s.t.Context(), podsPoll, podsTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := s.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods = list.Items
		good := 0
		for i := range pods {
			if ok(&pods[i]) {
				good++
			}
		}
		last = fmt.Sprintf("%d pods, %d as wanted", len(pods), good)
		return len(pods) == want && good == want, nil
	})
	if err != nil {
		s.t.Fatalf("wait for %d pods %s in %s (last: %s): %v", want, selector, s.ns, last, err)
	}
	return pods
}

// waitRunning waits until exactly want pods match the selector and all run.
func (s *scenario) waitRunning(selector string, want int) []corev1.Pod {
	s.t.Helper()
	return s.waitPods(selector, want, running)
}

// logExact waits for SPIRE to hold exactly the pods' entries and logs how long that took
// after since, when what happened.
func (s *scenario) logExact(what string, since time.Time) []entry {
	s.t.Helper()
	_, entries := s.waitExact(s.t, s.ns, what)
	s.t.Logf("%s: SPIRE holds exactly the running pods' %d entries %s after %s",
		s.ns, len(entries), time.Since(since).Round(time.Millisecond), what)
	return entries
}
