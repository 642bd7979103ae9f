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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

const jobPods = 50

// TestJobCompletes runs a Job of 50 pods to completion: once they have Succeeded their
// entries are gone, though the pods remain.
func TestJobCompletes(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "job", false)
	p, stopProbe := s.startProbe()
	labels := map[string]string{"app": "batch"}
	tmpl := s.podTemplate(labels)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "batch"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](jobPods),
			Parallelism: ptr.To[int32](jobPods),
			Template:    tmpl,
		},
	}
	start := time.Now()
	if _, err := s.client.BatchV1().Jobs(s.ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last batchv1.JobStatus
	err := wait.PollUntilContextTimeout(t.Context(), podsPoll, podsTimeout, true, func(ctx context.Context) (bool, error) {
		j, err := s.client.BatchV1().Jobs(s.ns).Get(ctx, "batch", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = j.Status
		return j.Status.Succeeded == jobPods && j.Status.CompletionTime != nil, nil
	})
	if err != nil {
		t.Fatalf("Job never completed (last status %+v): %v", last, err)
	}
	t.Logf("Job of %d pods completed after %s", jobPods, time.Since(start).Round(time.Millisecond))
	pods := s.waitPods("app=batch", jobPods, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	entries := s.logExact("the Job was created", start)
	if len(entries) != 0 {
		t.Errorf("%d entries for a completed Job, want none", len(entries))
	}
	stopProbe()
	var uids []string
	for _, pod := range pods {
		uids = append(uids, string(pod.UID))
	}
	registered, _ := p.latencies(uids, p.scheduled, p.entrySeen)
	unregistered, _ := p.latencies(uids, p.entrySeen, p.entryGone)
	t.Logf("%d of the %d Job pods were seen registered while they ran (kwok completes them within seconds); entry lifetime p50 %s, max %s",
		len(registered), jobPods, percentile(unregistered, 0.5).Round(time.Millisecond), percentile(unregistered, 1).Round(time.Millisecond))
}
