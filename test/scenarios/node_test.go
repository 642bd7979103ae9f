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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const nodePods = 40

// TestNodeDeleted deletes a node with pods on it. Their entries go at once: no agent is
// left to serve them. kube-controller-manager's pod garbage collector deletes the pods once
// the node has been gone for its quarantine (40 s, checked every 20 s), and their
// replacements on the other nodes get entries. It runs in the background of the other
// scenarios: most of it is the garbage collector's wait.
func TestNodeDeleted(t *testing.T) {
	t.Parallel()
	s := newBackgroundScenario(t, "node", false)
	ctx := t.Context()
	// Only this scenario's pods may run on the node it deletes.
	const doomed = "kwok-doomed"
	taint := corev1.Taint{Key: "scenarios.example.org/doomed", Effect: corev1.TaintEffectNoSchedule}
	_, err := realcluster.CreateKwokNode(ctx, s.client, doomed, func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, taint) })
	if err != nil {
		t.Fatal(err)
	}
	if err := realcluster.WaitNodeReady(ctx, s.client, doomed); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d := s.deployment("web", nodePods)
	d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations,
		corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: taint.Effect})
	s.createDeployment(d)
	pods := s.waitRunning("app=web", nodePods)
	s.logExact("the Deployment was created", start)
	onDoomed := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == doomed {
			onDoomed[string(p.UID)] = true
		}
	}
	if len(onDoomed) == 0 {
		t.Fatalf("none of %d pods was scheduled on node %s", nodePods, doomed)
	}

	p, stopProbe := s.startProbe()
	start = time.Now()
	if err := s.client.CoreV1().Nodes().Delete(ctx, doomed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pods still exist, but their node and its agent do not: their entries go at once.
	entries := s.logExact("the node was deleted, before its pods were garbage-collected", start)
	if len(entries) != nodePods-len(onDoomed) {
		t.Fatalf("%d entries, want %d: the pods of the other nodes", len(entries), nodePods-len(onDoomed))
	}
	replaced := s.waitPods("app=web", nodePods, func(p *corev1.Pod) bool { return running(p) && !onDoomed[string(p.UID)] })
	t.Logf("the %d pods of node %s garbage-collected and replaced %s after the node was deleted", len(onDoomed), doomed, time.Since(start).Round(time.Millisecond))
	for _, p := range replaced {
		if p.Spec.NodeName == doomed {
			t.Errorf("pod %s on deleted node %s", p.Name, doomed)
		}
	}
	s.logExact("the node was deleted", start)
	stopProbe()
	var gone []time.Duration
	p.mu.Lock()
	for uid := range onDoomed {
		if at, ok := p.entryGone[uid]; ok {
			gone = append(gone, at.Sub(start))
		}
	}
	p.mu.Unlock()
	if len(gone) != len(onDoomed) {
		t.Errorf("the probe saw %d of the %d entries of the deleted node's pods go", len(gone), len(onDoomed))
	}
	t.Logf("node deleted → its %d pods' entries gone: p50 %s, max %s (SPIRE polled every %s)",
		len(gone), percentile(gone, 0.5).Round(time.Millisecond), percentile(gone, 1).Round(time.Millisecond), entryPollInterval)
}
