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
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestWebhookAsTheChartRegistersIt runs the binary with the config fields the Helm chart sets
// for the webhook (validatingWebhookConfigurationName, webhook.port, ENABLE_WEBHOOKS=true) and a
// ValidatingWebhookConfiguration of the chart's shape, called by URL since no Service can reach
// a process outside a cluster. The binary writes SPIRE's authorities into the caBundle, the real
// API server calls it, and it admits what the controller can reconcile and denies, naming the
// field, what CEL cannot see: a template that names an unknown field, a label selector that
// does not parse, a bundle endpoint port out of range.
func TestWebhookAsTheChartRegistersIt(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	port := freePort(t)
	if err := realcluster.RegisterChartWebhooks(ctx, stack.Client, "spire-system-spire-controller-manager-webhook", port); err != nil {
		t.Fatal(err)
	}

	config := writeFile(t, fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: %s
clusterName: it
spireServerSocketPath: %s
validatingWebhookConfigurationName: spire-system-spire-controller-manager-webhook
webhook:
  host: 127.0.0.1
  port: %d
`, stack.SPIRE.TrustDomain(), stack.SPIRE.SocketPath(), port))
	var logs realcluster.SyncBuffer
	cmd := exec.Command(bin, "--kubeconfig", stack.Kube.Kubeconfig(), "--config", config)
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

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return realcluster.CABundlesWritten(ctx, stack.Client, "spire-system-spire-controller-manager-webhook")
	})
	if err != nil {
		t.Fatalf("the caBundles were never written: %v", err)
	}
	t.Logf("binary start to caBundle written: %v", time.Since(start).Round(time.Millisecond))

	td := stack.SPIRE.TrustDomain()
	good := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "good"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}"}}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, good, metav1.CreateOptions{})
		if err != nil {
			t.Logf("create a valid ClusterSPIFFEID: %v", err)
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("a valid ClusterSPIFFEID was never admitted")
	}
	t.Logf("binary start to first admission: %v", time.Since(start).Round(time.Millisecond))

	denied := []struct {
		name   string
		create func() error
		want   []string
	}{
		{"unknown field in a template", func() error {
			_, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
				ObjectMeta: metav1.ObjectMeta{Name: "typo"},
				Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://" + td + "/{{ .PodMeta.Tier }}"},
			}, metav1.CreateOptions{})
			return err
		}, []string{"denied the request", "spec.spiffeIDTemplate", "Tier"}},
		{"label selector that does not parse", func() error {
			_, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
				ObjectMeta: metav1.ObjectMeta{Name: "selector"},
				Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://" + td + "/x",
					PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "not a label value!"}}},
			}, metav1.CreateOptions{})
			return err
		}, []string{"denied the request", "spec.podSelector"}},
		{"bundle endpoint port out of range", func() error {
			_, err := stack.SpireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().Create(ctx, &spirev1alpha1.ClusterFederatedTrustDomain{
				ObjectMeta: metav1.ObjectMeta{Name: "port"},
				Spec: spirev1alpha1.ClusterFederatedTrustDomainSpec{TrustDomain: "other.test",
					BundleEndpointURL:     "https://other.test:99999/bundle",
					BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSWebProfileType}},
			}, metav1.CreateOptions{})
			return err
		}, []string{"denied the request", "spec.bundleEndpointURL"}},
	}
	for _, tc := range denied {
		err := tc.create()
		if err == nil {
			t.Errorf("%s: admitted, want denied", tc.name)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v; want it to contain %q", tc.name, err, want)
			}
		}
	}
}
