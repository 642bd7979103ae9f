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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// TestSCM runs spire-controller-manager v0.7.0 on its own CRDs and checks
// that a ClusterSPIFFEID selecting a pod gives that pod its entry in SPIRE.
func TestSCM(t *testing.T) {
	skipIfShort(t)
	ctx := t.Context()
	stack := NewStackWith(t, StackOptions{SCMCRDs: true})

	dyn, err := dynamic.NewForConfig(stack.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Its own CRDs, not ours: their status has no conditions.
	crds, err := apiextensionsclient.NewForConfig(stack.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "clusterspiffeids.spire.spiffe.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	if _, ok := status.Properties["stats"]; !ok {
		t.Fatalf("ClusterSPIFFEID status schema has no stats: %+v", status)
	}
	if _, ok := status.Properties["conditions"]; ok {
		t.Fatal("ClusterSPIFFEID status has conditions: our CRDs were installed, not spire-controller-manager's")
	}
	node, err := CreateNode(ctx, stack.Client, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureNamespace(ctx, stack.Client, "apps"); err != nil {
		t.Fatal(err)
	}
	pod, err := CreatePod(ctx, stack.Client, "apps", "web-0", "node-a", func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "web"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SetPodPhase(ctx, stack.Client, "apps", "web-0", corev1.PodRunning); err != nil {
		t.Fatal(err)
	}
	id := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "spire.spiffe.io/v1alpha1",
		"kind":       "ClusterSPIFFEID",
		"metadata":   map[string]any{"name": "web"},
		"spec": map[string]any{
			"spiffeIDTemplate": "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
			"podSelector":      map[string]any{"matchLabels": map[string]any{"app": "web"}},
		},
	}}
	gvr := schema.GroupVersionResource{Group: "spire.spiffe.io", Version: "v1alpha1", Resource: "clusterspiffeids"}
	if _, err := dyn.Resource(gvr).Create(ctx, id, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	scm := NewSCM(t, SCMOptions{
		Kubeconfig: stack.Kube.Kubeconfig(),
		SPIRE:      stack.SPIRE,
		Config:     SCMConfig{EntryIDPrefix: "rc", IgnoreNamespaces: []string{"kube-system"}},
	})
	ready := time.Since(start)

	want := []Entry{{
		SPIFFEID: "spiffe://example.org/ns/apps/sa/default",
		ParentID: fmt.Sprintf("spiffe://example.org/spire/agent/k8s_psat/%s/%s", SCMClusterName, node.UID),
		// spire-controller-manager selects a pod by its UID alone.
		Selectors: []Selector{{Type: "k8s", Value: "pod-uid:" + string(pod.UID)}},
	}}
	// At start it also creates and deletes a probe entry of its own: wait
	// until just the pod's entry is left.
	var got []Entry
	var ids []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := stack.SPIRE.EntryShow(ctx)
		if err != nil {
			return false, err
		}
		got, ids = nil, nil
		for _, e := range entries {
			got = append(got, Entry{SPIFFEID: e.SPIFFEID, ParentID: e.ParentID, Selectors: e.Selectors})
			ids = append(ids, e.ID)
		}
		return cmp.Equal(want, got), nil
	})
	if err != nil {
		t.Fatalf("SPIRE entries %+v, want %+v: %v", got, want, err)
	}
	t.Logf("spire-controller-manager ready in %s, pod's entry in SPIRE %s after start", ready.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(ids[0], "rc.") {
		t.Fatalf("entry ID %q lacks the configured prefix rc.", ids[0])
	}

	resp, err := http.Get(scm.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: HTTP %d", resp.StatusCode)
	}
}

func TestSCMConfigFillsWhatTheHarnessNeeds(t *testing.T) {
	chart := []byte(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
metrics:
  bindAddress: 0.0.0.0:8082
health:
  healthProbeBindAddress: 0.0.0.0:8083
clusterName: demo
trustDomain: example.org
spireServerSocketPath: /tmp/spire-server/private/api.sock
gcInterval: 10000000000
`)
	config, err := scmConfig(SCMOptions{ConfigYAML: chart})
	if err != nil {
		t.Fatal(err)
	}
	s := &SCM{configPath: filepath.Join(t.TempDir(), SCMConfigFile)}
	readyURL, metricsURL, err := s.writeConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	if readyURL != "http://127.0.0.1:8083/readyz" || metricsURL != "http://127.0.0.1:8082/metrics" {
		t.Fatalf("ready URL %q, metrics URL %q", readyURL, metricsURL)
	}
	data, err := os.ReadFile(s.configPath)
	if err != nil {
		t.Fatal(err)
	}
	var written map[string]any
	if err := yaml.Unmarshal(data, &written); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion":            "spire.spiffe.io/v1alpha1",
		"kind":                  "ControllerManagerConfig",
		"metrics":               map[string]any{"bindAddress": "0.0.0.0:8082"},
		"health":                map[string]any{"healthProbeBindAddress": "0.0.0.0:8083"},
		"clusterName":           "demo",
		"clusterDomain":         "cluster.local",
		"trustDomain":           "example.org",
		"spireServerSocketPath": "/tmp/spire-server/private/api.sock",
		"gcInterval":            float64(10000000000),
	}
	if diff := cmp.Diff(want, written); diff != "" {
		t.Fatalf("written config (-want +got):\n%s", diff)
	}

	// From the struct, the socket and trust domain come from SPIRE, and
	// health and metrics go to free loopback ports.
	spire := &SPIRE{socketPath: "/tmp/s/api.sock", trustDomain: "other.test"}
	config, err = scmConfig(SCMOptions{SPIRE: spire, Config: SCMConfig{GCInterval: time.Second, Extra: map[string]any{"reconcile": map[string]any{"clusterSPIFFEIDs": true}}}})
	if err != nil {
		t.Fatal(err)
	}
	readyURL, _, err = s.writeConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(readyURL, "http://127.0.0.1:") || !strings.HasSuffix(readyURL, "/readyz") {
		t.Fatalf("ready URL %q", readyURL)
	}
	for key, want := range map[string]any{"trustDomain": "other.test", "spireServerSocketPath": "/tmp/s/api.sock", "gcInterval": int64(time.Second), "clusterName": SCMClusterName} {
		if got := config[key]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	if _, ok := config["reconcile"]; !ok {
		t.Error("Extra field reconcile not written")
	}
	if _, err := scmConfig(SCMOptions{}); err == nil {
		t.Error("a config without a SPIRE socket was accepted")
	}
}
