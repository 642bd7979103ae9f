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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestChartWalkThrough runs the binary as the official Helm chart runs spire-controller-manager:
// its rendered config file (leader election on; only the listen addresses and the socket are
// this machine's), read relative to the working directory as `--config=controller-manager-config.yaml`,
// ENABLE_WEBHOOKS=true, spire-controller-manager's own CRDs and the chart's
// ValidatingWebhookConfiguration. It must become ready, take the Lease, give a pod its entry
// under the chart's entryIDPrefix, and answer admission through the API server.
func TestChartWalkThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SCMCRDs: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := stack.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "spire-server"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	const vwcName = "spire-server-spire-controller-manager-webhook"
	webhookPort, metricsPort, healthPort := freePort(t), freePort(t), freePort(t)
	registerChartWebhooks(t, ctx, stack.Client, vwcName, webhookPort)

	conf := chartConfig
	for old, replacement := range map[string]string{
		"metrics: {bindAddress: 0.0.0.0:0}":                         fmt.Sprintf("metrics: {bindAddress: 127.0.0.1:%d}", metricsPort),
		"health: {healthProbeBindAddress: 0.0.0.0:0}":               fmt.Sprintf("health: {healthProbeBindAddress: 127.0.0.1:%d}", healthPort),
		"leaderElect: false":                                        "leaderElect: true",
		"spireServerSocketPath: /tmp/spire-server/private/api.sock": "spireServerSocketPath: " + stack.SPIRE.SocketPath(),
	} {
		if !strings.Contains(conf, old) {
			t.Fatalf("chartConfig has no %q", old)
		}
		conf = strings.Replace(conf, old, replacement, 1)
	}
	conf += fmt.Sprintf("webhook: {host: 127.0.0.1, port: %d}\n", webhookPort)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "controller-manager-config.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs realcluster.SyncBuffer
	cmd := exec.Command(bin, "--config=controller-manager-config.yaml", "--kubeconfig="+stack.Kube.Kubeconfig())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ENABLE_WEBHOOKS=true")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("spire-registrar output:\n%s", logs.String())
		}
	}()
	poll := func(what string, cond func(context.Context) (bool, error)) time.Duration {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, cond); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		took := time.Since(start).Round(time.Millisecond)
		t.Logf("binary start to %s: %v", what, took)
		return took
	}

	poll("/readyz answering 200", func(context.Context) (bool, error) {
		code, _ := get(fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
		return code == http.StatusOK, nil
	})
	poll("the Lease held", func(ctx context.Context) (bool, error) {
		lease, err := stack.Client.CoordinationV1().Leases("spire-server").Get(ctx, "98c9c988.spiffe.io", metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
	poll("the caBundle written", func(ctx context.Context) (bool, error) {
		return caBundlesWritten(ctx, stack.Client, vwcName)
	})

	node, err := realcluster.CreateNode(ctx, stack.Client, "chart-node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreatePod(ctx, stack.Client, "shop", "web", node.Name); err != nil {
		t.Fatal(err)
	}
	good := &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"spire.spiffe.io/class-name": "spire-server-spire"}},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			ClassName:        "spire-server-spire",
			SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
			PodSelector:      &metav1.LabelSelector{},
		},
	}
	poll("a valid ClusterSPIFFEID admitted", func(ctx context.Context) (bool, error) {
		_, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, good, metav1.CreateOptions{})
		return err == nil, nil
	})
	_, err = stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "typo"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{ClassName: "spire-server-spire", SPIFFEIDTemplate: "spiffe://example.org/{{ .PodMeta.Tier }}"},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), "spec.spiffeIDTemplate") {
		t.Errorf("a template naming an unknown field: %v, want it denied naming spec.spiffeIDTemplate", err)
	}
	poll("the pod's entry in SPIRE under the chart's entryIDPrefix", func(ctx context.Context) (bool, error) {
		out, err := stack.SPIRE.CLI(ctx, "entry show", "-output", "json")
		if err != nil {
			return false, nil
		}
		var shown struct {
			Entries []struct {
				ID       string `json:"id"`
				SPIFFEID struct {
					Path string `json:"path"`
				} `json:"spiffe_id"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(out, &shown); err != nil {
			return false, err
		}
		for _, e := range shown.Entries {
			if e.SPIFFEID.Path == "/ns/shop/sa/default" {
				if !strings.HasPrefix(e.ID, "example-cluster.") {
					return false, fmt.Errorf("the pod's entry has ID %q, want the chart's prefix example-cluster", e.ID)
				}
				return true, nil
			}
		}
		return false, nil
	})
}
