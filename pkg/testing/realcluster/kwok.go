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
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

const (
	// KwokNodeAnnotation marks the nodes kwok manages; its value is "fake".
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// KwokNodeTaint keeps real workloads off kwok's fake nodes (value
	// "fake", effect NoSchedule); pods opt in with KwokPodSpec.
	KwokNodeTaint = "kwok.x-k8s.io/node"
	// KwokNodeTypeLabel is the node label pods select kwok nodes by; its value is "kwok".
	KwokNodeTypeLabel = "type"

	kwokFake = "fake"
	kwokType = "kwok"

	// KwokPodCIDR is where kwok takes pod IPs from: apart from the service
	// range, unlike kwok's default.
	KwokPodCIDR = "10.244.0.0/16"
	// KwokNodeLeaseDurationSeconds is the node lease kwok keeps for each
	// node. Without leases the node-lifecycle controller may take a node for
	// stale and mark its pods NotReady, and kwok never sets them back.
	KwokNodeLeaseDurationSeconds = 40

	kwokReadyTimeout = 60 * time.Second
	kwokStopGrace    = 10 * time.Second
	nodeReadyTimeout = 60 * time.Second
)

// kwokStages are kwok's stock stage sets, read from its module: nodes turn
// Ready and keep a lease; pods turn Running and Ready with an IP, Job pods
// complete, and graceful deletes finish.
var kwokStages = []string{"node/fast", "node/heartbeat-with-lease", "pod/fast"}

// KwokStageFiles returns the stage files of kwokStages as listed by their
// kustomization.yaml files in the kwok module of the Go module cache.
func KwokStageFiles(ctx context.Context) ([]string, error) {
	dir, err := ModuleDir(ctx, KwokModule)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, stage := range kwokStages {
		stageDir := filepath.Join(dir, "kustomize", "stage", filepath.FromSlash(stage))
		data, err := os.ReadFile(filepath.Join(stageDir, "kustomization.yaml"))
		if err != nil {
			return nil, fmt.Errorf("read kwok stage %s: %w", stage, err)
		}
		var kustomization struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.Unmarshal(data, &kustomization); err != nil {
			return nil, fmt.Errorf("parse kwok stage %s kustomization: %w", stage, err)
		}
		if len(kustomization.Resources) == 0 {
			return nil, fmt.Errorf("kwok stage %s lists no resources", stage)
		}
		for _, r := range kustomization.Resources {
			files = append(files, filepath.Join(stageDir, filepath.FromSlash(r)))
		}
	}
	return files, nil
}

// startKwok runs kwok for the nodes annotated KwokNodeAnnotation=fake and
// waits until its controllers run (its /healthz answers once they do).
func (k *Kube) startKwok(ctx context.Context, bin string, extra []string) error {
	stageFiles, err := KwokStageFiles(ctx)
	if err != nil {
		return err
	}
	var (
		addr  string
		start time.Time
	)
	err = startOnFreePorts("kwok", func() (*process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		addr = "127.0.0.1:" + strconv.Itoa(ports[0])
		args := []string{
			"--kubeconfig=" + k.kubeconfig,
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + kwokFake,
			"--node-lease-duration-seconds=" + strconv.Itoa(KwokNodeLeaseDurationSeconds),
			"--cidr=" + KwokPodCIDR,
			"--server-address=" + addr,
		}
		for _, f := range stageFiles {
			args = append(args, "--config="+f)
		}
		k.kwok = newProcess(Kwok, bin, filepath.Join(k.dir, "kwok.log"), append(args, extra...)...)
		// kwok also loads ~/.kwok/kwok.yaml when it exists: keep a user's file out.
		k.kwok.env = append(os.Environ(), "HOME="+k.dir)
		k.logf.printf("realcluster: starting kwok on %s", addr)
		start = time.Now()
		return k.kwok, k.kwok.start()
	}, func() error {
		return waitHTTPReady(ctx, k.kwok, kwokReadyTimeout, &http.Client{Timeout: 2 * time.Second}, "http://"+addr+"/healthz")
	})
	if err != nil {
		return err
	}
	k.logf.printf("realcluster: kwok healthy in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// KwokNode makes a node one that kwok manages, as kwok's documentation
// shows: the annotation, the type label and the taint. Pass it to CreateNode.
func KwokNode(node *corev1.Node) {
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[KwokNodeAnnotation] = kwokFake
	// As in kwok's examples: a kubelet would cache secrets and config maps this long.
	node.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[KwokNodeTypeLabel] = kwokType
	node.Labels[corev1.LabelOSStable] = "linux"
	node.Labels[corev1.LabelArchStable] = "amd64"
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: KwokNodeTaint, Value: kwokFake, Effect: corev1.TaintEffectNoSchedule})
}

// CreateKwokNode creates a node that kwok manages (see KwokNode); it turns
// Ready within a second or so. mutate functions may adjust it further.
func CreateKwokNode(ctx context.Context, c kubernetes.Interface, name string, mutate ...func(*corev1.Node)) (*corev1.Node, error) {
	return CreateNode(ctx, c, name, append([]func(*corev1.Node){KwokNode}, mutate...)...)
}

// KwokPodSpec lets a pod run on kwok's nodes only: it tolerates their taint
// and requires their type label. Apply it to a pod template's spec.
func KwokPodSpec(spec *corev1.PodSpec) {
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: KwokNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
	})
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	requirement := corev1.NodeSelectorRequirement{Key: KwokNodeTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{kwokType}}
	if len(*terms) == 0 {
		*terms = append(*terms, corev1.NodeSelectorTerm{})
	}
	// Terms are ORed: the requirement must be in each.
	for i := range *terms {
		(*terms)[i].MatchExpressions = append((*terms)[i].MatchExpressions, requirement)
	}
}

// WaitNodeReady waits until the node reports Ready and carries no
// node.kubernetes.io/not-ready taint any more, i.e. until the scheduler will
// place pods on it.
func WaitNodeReady(ctx context.Context, c kubernetes.Interface, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, readyPollInterval, nodeReadyTimeout, true, func(ctx context.Context) (bool, error) {
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			last = "not Ready"
			return false, nil
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				last = "still tainted " + taint.Key
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for node %s to be ready (last: %s): %w", name, last, err)
	}
	return nil
}
