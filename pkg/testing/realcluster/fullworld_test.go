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

package realcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const fullWorldTimeout = 2 * time.Minute

// TestFullWorldDeployment checks what the full world promises: a Deployment's
// pods are scheduled onto kwok nodes and turn Running and Ready with IPs, a
// Service's EndpointSlices list them, and a graceful delete completes.
func TestFullWorldDeployment(t *testing.T) {
	skipIfShort(t)
	ctx := t.Context()
	kube := NewKube(t, KubeOptions{Full: true})
	client, err := kube.Client()
	if err != nil {
		t.Fatal(err)
	}

	const ns = "apps"
	if err := EnsureNamespace(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	if err := WaitServiceAccount(ctx, client, ns, "default"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nodes := []string{"kwok-a", "kwok-b"}
	for _, name := range nodes {
		if _, err := CreateKwokNode(ctx, client, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range nodes {
		if err := WaitNodeReady(ctx, client, name); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kwok nodes ready in %s", len(nodes), time.Since(start).Round(time.Millisecond))
	// kwok keeps node leases, so the node-lifecycle controller never takes
	// a node for stale.
	err = wait.PollUntilContextTimeout(ctx, readyPollInterval, fullWorldTimeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range nodes {
			lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
			if err != nil || lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds != KwokNodeLeaseDurationSeconds {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("no %d-second node leases for %v: %v", KwokNodeLeaseDurationSeconds, nodes, err)
	}

	labels := map[string]string{"app": "web"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](5),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "main", Image: PlaceholderImage}},
				},
			},
		},
	}
	KwokPodSpec(&deployment.Spec.Template.Spec)
	start = time.Now()
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitRunningPods(t, client, ns, "app=web", 5)
	t.Logf("Deployment of 5 replicas Running and Ready in %s", time.Since(start).Round(time.Millisecond))
	var ips []string
	for _, p := range pods {
		if !slices.Contains(nodes, p.Spec.NodeName) {
			t.Errorf("pod %s on node %q, want a kwok node", p.Name, p.Spec.NodeName)
		}
		// Only the ServiceAccount admission plugin sets it for controllers' pods.
		if p.Spec.ServiceAccountName != "default" {
			t.Errorf("pod %s has service account %q, want default", p.Name, p.Spec.ServiceAccountName)
		}
		ips = append(ips, p.Status.PodIP)
	}
	slices.Sort(ips)

	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	start = time.Now()
	if _, err := client.CoreV1().Services(ns).Create(ctx, service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var sliceIPs []string
	err = wait.PollUntilContextTimeout(ctx, readyPollInterval, fullWorldTimeout, true, func(ctx context.Context) (bool, error) {
		sliceIPs, err = readyEndpointSliceAddresses(ctx, client, ns, "web")
		return err == nil && slices.Equal(sliceIPs, ips), nil
	})
	if err != nil {
		t.Fatalf("EndpointSlices of service web list %v, want the pods' IPs %v: %v", sliceIPs, ips, err)
	}
	t.Logf("EndpointSlices list the 5 pods %s after the Service was created", time.Since(start).Round(time.Millisecond))

	victim := pods[0]
	start = time.Now()
	// A graceful delete: only kwok's pod-delete stage can finish it.
	if err := client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, readyPollInterval, fullWorldTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s still exists after a graceful delete: %v", victim.Name, err)
	}
	t.Logf("graceful delete of pod %s completed in %s", victim.Name, time.Since(start).Round(time.Millisecond))

	after := waitRunningPods(t, client, ns, "app=web", 5)
	for _, p := range after {
		if p.UID == victim.UID {
			t.Fatalf("deleted pod %s is back among the running pods", victim.Name)
		}
	}
}

// waitRunningPods waits until exactly want pods match the selector and each
// is Running and Ready with an IP, and returns them.
func waitRunningPods(t *testing.T, client kubernetes.Interface, ns, selector string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), readyPollInterval, fullWorldTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods = list.Items
		running := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && podReady(&p) {
				running++
			}
		}
		last = fmt.Sprintf("%d pods, %d of them Running and Ready with an IP", len(pods), running)
		return len(pods) == want && running == want, nil
	})
	if err != nil {
		t.Fatalf("wait for %d running pods %s in %s (last: %s): %v", want, selector, ns, last, err)
	}
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyEndpointSliceAddresses returns the sorted addresses of the ready
// endpoints in all EndpointSlices of a service.
func readyEndpointSliceAddresses(ctx context.Context, client kubernetes.Interface, ns, service string) ([]string, error) {
	slicesList, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, s := range slicesList.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				addrs = append(addrs, e.Addresses...)
			}
		}
	}
	slices.Sort(addrs)
	return addrs, nil
}

func TestKwokPodSpec(t *testing.T) {
	var spec corev1.PodSpec
	KwokPodSpec(&spec)
	want := corev1.PodSpec{
		Tolerations: []corev1.Toleration{{Key: KwokNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: KwokNodeTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"kwok"}}},
			}}},
		}},
	}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Fatalf("KwokPodSpec (-want +got):\n%s", diff)
	}
}

func TestKwokStageFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("may download the kwok module; skipped with -short")
	}
	files, err := KwokStageFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var base []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
		base = append(base, filepath.Base(f))
	}
	want := []string{"node-initialize.yaml", "node-heartbeat-with-lease.yaml", "pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml"}
	if diff := cmp.Diff(want, base); diff != "" {
		t.Fatalf("kwok stage files (-want +got):\n%s", diff)
	}
}
