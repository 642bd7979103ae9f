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
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

const rolloutReplicas = 200

// TestDeploymentRollout rolls a Deployment of 200 replicas out to a new template, 25% surge
// and 25% unavailable as users commonly set them: the new pods get their entries as they
// are scheduled and the old pods' entries go as they terminate. It measures both
// latencies by watching the pods and polling SPIRE's API.
func TestDeploymentRollout(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "rollout", false)
	ctx := t.Context()
	d := s.deployment("web", rolloutReplicas)
	quarter := intstr.FromString("25%")
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &quarter, MaxUnavailable: &quarter},
	}
	start := time.Now()
	s.createDeployment(d)
	old := s.waitRunning("app=web", rolloutReplicas)
	t.Logf("Deployment of %d replicas running after %s", rolloutReplicas, time.Since(start).Round(time.Millisecond))
	s.logExact("the Deployment was created", start)
	oldUIDs := map[string]bool{}
	for _, p := range old {
		oldUIDs[string(p.UID)] = true
	}

	p, stopProbe := s.startProbe()
	start = time.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := s.client.AppsV1().Deployments(s.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if latest.Spec.Template.Annotations == nil {
			latest.Spec.Template.Annotations = map[string]string{}
		}
		latest.Spec.Template.Annotations["example.org/revision"] = "2"
		_, err = s.client.AppsV1().Deployments(s.ns).Update(ctx, latest, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitRolledOut("web", rolloutReplicas)
	current := s.waitPods("app=web", rolloutReplicas, func(p *corev1.Pod) bool { return running(p) && !oldUIDs[string(p.UID)] })
	t.Logf("rolled out to %d new pods after %s", rolloutReplicas, time.Since(start).Round(time.Millisecond))
	s.logExact("the rollout began", start)
	// One more poll, so that the probe has seen the last entries go.
	time.Sleep(3 * entryPollInterval)
	stopProbe()

	var newUIDs []string
	for _, pod := range current {
		newUIDs = append(newUIDs, string(pod.UID))
	}
	registered, missing := p.latencies(newUIDs, p.scheduled, p.entrySeen)
	if missing > 0 {
		t.Errorf("%d of %d new pods were never seen both scheduled and registered", missing, len(newUIDs))
	}
	t.Logf("pod scheduled → entry in SPIRE, %d new pods: p50 %s, p99 %s, max %s (SPIRE polled %d times, every %s at best)",
		len(registered), percentile(registered, 0.5).Round(time.Millisecond), percentile(registered, 0.99).Round(time.Millisecond),
		percentile(registered, 1).Round(time.Millisecond), p.polls, entryPollInterval)
	var goneUIDs []string
	for uid := range oldUIDs {
		goneUIDs = append(goneUIDs, uid)
	}
	removed, missing := p.latencies(goneUIDs, p.deleted, p.entryGone)
	if missing > 0 {
		t.Errorf("%d of %d old pods were never seen both deleted and unregistered", missing, len(goneUIDs))
	}
	t.Logf("pod deleted → entry gone from SPIRE, %d old pods: p50 %s, p99 %s, max %s",
		len(removed), percentile(removed, 0.5).Round(time.Millisecond), percentile(removed, 0.99).Round(time.Millisecond),
		percentile(removed, 1).Round(time.Millisecond))
	if p.pollErrors > 0 {
		t.Logf("%d of SPIRE's %d polls failed, the last with: %v", p.pollErrors, p.polls, p.lastError)
	}
}

// waitRolledOut waits until the Deployment's controller has seen its latest spec and every
// replica is updated and available.
func (s *scenario) waitRolledOut(name string, replicas int32) {
	s.t.Helper()
	var last appsv1.DeploymentStatus
	err := wait.PollUntilContextTimeout(s.t.Context(), podsPoll, podsTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := s.client.AppsV1().Deployments(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = d.Status
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == replicas &&
			d.Status.Replicas == replicas && d.Status.AvailableReplicas == replicas, nil
	})
	if err != nil {
		s.t.Fatalf("Deployment %s not rolled out (last status %+v): %v", name, last, err)
	}
}
