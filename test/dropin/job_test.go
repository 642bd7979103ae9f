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

package dropin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// jobName is the Job whose completed pod shows the one deliberate difference a swap writes.
const jobName = "migrate"

// swapEnv is what the swap phases share.
type swapEnv struct {
	stack                   *realcluster.Stack
	dyn                     dynamic.Interface
	scm                     *realcluster.SCM
	bin                     string
	args, env               []string
	metricsAddr, healthAddr string
}

// swapWithCompletedJob swaps once more, from the running spire-controller-manager, with a
// completed Job pod in the cluster: spire-controller-manager keeps its entry, spire-registrar
// deletes it, as docs/differences.md says. The dry run must plan exactly that delete, the swap
// must write exactly that delete, and nothing else may change.
func swapWithCompletedJob(ctx context.Context, t *testing.T, e swapEnv) {
	t.Helper()
	client := e.stack.Client
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: jobName},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": jobName}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: realcluster.PlaceholderImage}},
				},
			},
		},
	}
	realcluster.KwokPodSpec(&job.Spec.Template.Spec)
	if _, err := client.BatchV1().Jobs("apps").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, worldTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods("apps").List(ctx, metav1.ListOptions{LabelSelector: "app=" + jobName})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		pod = pods.Items[0]
		return pod.Status.Phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		t.Fatalf("the Job's pod never succeeded (phase %q): %v", pod.Status.Phase, err)
	}
	before, writesBefore := waitSteady(ctx, t, e.stack.SPIRE, e.dyn, steadyFor, checkCoverageWithJobEntries(1))
	i := slices.IndexFunc(before.Entries, func(en realcluster.Entry) bool {
		return strings.HasPrefix(en.SPIFFEID, "spiffe://example.org/fallback/apps/"+jobName+"-")
	})
	jobEntry := before.Entries[i]
	if err := e.scm.Stop(); err != nil {
		t.Fatal(err)
	}

	// The dry run plans exactly the delete of the finished pod's entry.
	plan := filepath.Join(t.TempDir(), "plan.jsonl")
	dryMetrics := freeLoopbackAddr(t)
	dry := startRegistrar(t, e.bin, t.TempDir(), append(slices.Clone(e.args), "--dry-run", "--dry-run-output="+plan, "--leader-elect=false",
		"--metrics-bind-address="+dryMetrics, "--health-probe-bind-address="+freeLoopbackAddr(t)), e.env)
	if err := waitResyncs(ctx, "http://"+dryMetrics+"/metrics", 2); err != nil {
		t.Fatal(err)
	}
	dry.stop(t)
	data, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		t.Fatal("the dry run planned nothing with a completed Job pod; want the delete of its entry")
	}
	var planned []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var w map[string]any
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			t.Fatalf("plan line %q: %v", line, err)
		}
		planned = append(planned, w)
	}
	// Nothing is written in a dry run, so every full resync plans the delete again.
	wantPlan := map[string]any{"op": "delete", "kind": "entry", "id": jobEntry.ID}
	for _, w := range planned {
		if diff := cmp.Diff(wantPlan, w); diff != "" {
			t.Errorf("dry run's plan with a completed Job pod has a write other than the delete of its entry (-want +got):\n%s", diff)
		}
	}

	reg := startRegistrar(t, e.bin, e.scm.Dir(), e.args, e.env)
	if err := reg.waitReady(ctx, "http://"+e.healthAddr+"/readyz"); err != nil {
		t.Fatal(err)
	}
	if err := waitResyncs(ctx, "http://"+e.metricsAddr+"/metrics", 3); err != nil {
		t.Fatal(err)
	}
	after, writesAfter := waitSteady(ctx, t, e.stack.SPIRE, e.dyn, steadyFor, checkCoverage)
	want := counters{
		"spire_server_rpc_entry_v1_entry_batch_delete_entry": 1,
		"spire_server_datastore_registration_entry_delete":   1,
	}
	writes := writesAfter.sub(writesBefore)
	if diff := cmp.Diff(want, writes); diff != "" {
		t.Errorf("SPIRE's writes after a swap with a completed Job pod (-want +got):\n%s", diff)
	}
	wantEntries := slices.Delete(slices.Clone(before.Entries), i, i+1)
	if diff := cmp.Diff(wantEntries, after.Entries); diff != "" {
		t.Errorf("entries after a swap with a completed Job pod, but for the Job pod's (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before.Relationships, after.Relationships); diff != "" {
		t.Errorf("relationships after a swap with a completed Job pod (-want +got):\n%s", diff)
	}
	// The fallback that declared the finished pod's entry counts it no more; the statuses are
	// otherwise as spire-controller-manager wrote them.
	wantStatus := withoutKnownStatusDifferences(t, before, false).Status
	gotStatus := withoutKnownStatusDifferences(t, after, true).Status
	wantStatus["ClusterSPIFFEID/catch-all"] = withEntriesToSet(t, wantStatus["ClusterSPIFFEID/catch-all"], -1)
	if diff := cmp.Diff(wantStatus, gotStatus); diff != "" {
		t.Errorf("statuses after a swap with a completed Job pod (-want +got):\n%s", diff)
	}
	t.Logf("swap with a completed Job pod: %.0f writes, the delete of its entry %s, as the dry run planned", total(writes), jobEntry.ID)
}

// withEntriesToSet returns a copy of a ClusterSPIFFEID status with stats.entriesToSet moved by delta.
func withEntriesToSet(t *testing.T, status any, delta int64) any {
	t.Helper()
	m, _ := status.(map[string]any)
	stats, _ := m["stats"].(map[string]any)
	n, ok := stats["entriesToSet"].(int64)
	if !ok {
		t.Fatalf("status %v has no stats.entriesToSet", status)
	}
	copied := map[string]any{}
	for k, v := range stats {
		copied[k] = v
	}
	copied["entriesToSet"] = n + delta
	return map[string]any{"stats": copied}
}
