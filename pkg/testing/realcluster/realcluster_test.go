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
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// testCRDs is a tiny multi-document CRD file: it exercises document
// splitting, comment-only documents and a cluster-scoped plus a namespaced kind.
const testCRDs = `# leading comment-only document
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.realcluster.test.example
spec:
  group: realcluster.test.example
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
# another comment
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.realcluster.test.example
spec:
  group: realcluster.test.example
  scope: Cluster
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real etcd, kube-apiserver and spire-server; skipped with -short")
	}
}

func TestRealCluster(t *testing.T) {
	skipIfShort(t)
	ctx := t.Context()

	start := time.Now()
	kube := NewKube(t, KubeOptions{})
	kubeStart := time.Since(start)
	start = time.Now()
	spire := NewSPIRE(t, SPIREOptions{})
	t.Logf("start-up times: etcd+kube-apiserver %s, spire-server %s", kubeStart.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	client, err := kube.Client()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("project CRDs", func(t *testing.T) {
		dir, err := CRDsDir()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Skipf("no project CRDs yet: %v", err)
		}
		start := time.Now()
		names, err := ApplyCRDs(ctx, kube.RESTConfig(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("applied %v in %s", names, time.Since(start).Round(time.Millisecond))
		if len(names) == 0 {
			t.Fatal("no CRDs applied")
		}
	})

	t.Run("test CRDs create then update", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "crds.yaml"), []byte(testCRDs), 0o644); err != nil {
			t.Fatal(err)
		}
		for round := range 2 { // the second round takes the update path
			start := time.Now()
			names, err := ApplyCRDs(ctx, kube.RESTConfig(), dir)
			t.Logf("round %d took %s", round, time.Since(start).Round(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if want := "widgets.realcluster.test.example,gadgets.realcluster.test.example"; strings.Join(names, ",") != want {
				t.Fatalf("applied %v, want %s", names, want)
			}
		}
		dyn, err := dynamic.NewForConfig(kube.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		widget := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "realcluster.test.example/v1",
			"kind":       "Widget",
			"metadata":   map[string]any{"name": "w", "namespace": "default"},
			"spec":       map[string]any{"size": int64(3)},
		}}
		gvr := schema.GroupVersionResource{Group: "realcluster.test.example", Version: "v1", Resource: "widgets"}
		start := time.Now()
		if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, widget, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create custom resource: %v", err)
		}
		t.Logf("first custom resource created in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("nodes and pods", func(t *testing.T) {
		if _, err := CreateNode(ctx, client, "node-a"); err != nil {
			t.Fatal(err)
		}
		if err := EnsureNamespace(ctx, client, "apps"); err != nil {
			t.Fatal(err)
		}
		if err := EnsureNamespace(ctx, client, "apps"); err != nil {
			t.Fatalf("EnsureNamespace is not idempotent: %v", err)
		}
		pod, err := CreatePod(ctx, client, "apps", "web-0", "node-a", func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "web"}
		})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != "node-a" || pod.Status.Phase != corev1.PodPending {
			t.Fatalf("pod node %q phase %q, want node-a Pending", pod.Spec.NodeName, pod.Status.Phase)
		}
		pod, err = SetPodPhase(ctx, client, "apps", "web-0", corev1.PodSucceeded)
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("phase %q after SetPodPhase, want Succeeded", pod.Status.Phase)
		}
		// A pod in the default namespace works right after start-up too.
		if _, err := CreatePod(ctx, client, "default", "db-0", "node-a"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("token request", func(t *testing.T) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "registrar", Namespace: "default"}}
		if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "registrar", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		if tr.Status.Token == "" {
			t.Fatal("TokenRequest returned no token")
		}
	})

	t.Run("kubeconfig", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kube.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
			t.Fatalf("get node through kubeconfig: %v", err)
		}
	})

	t.Run("fresh SPIRE is empty", func(t *testing.T) {
		entries, err := spire.EntryShow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Fatalf("entries on a fresh server: %+v", entries)
		}
		rels, err := spire.FederationShow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rels) != 0 {
			t.Fatalf("federation relationships on a fresh server: %+v", rels)
		}
		if spire.TrustDomain() != DefaultTrustDomain {
			t.Fatalf("trust domain %q", spire.TrustDomain())
		}
		if n := len(spire.SocketPath()); n > maxSocketPath {
			t.Fatalf("socket path is %d bytes", n)
		}
	})

	t.Run("SPIRE metrics", func(t *testing.T) {
		resp, err := http.Get(spire.MetricsURL())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "# TYPE") {
			t.Fatalf("metrics: HTTP %d: %.200s", resp.StatusCode, body)
		}
	})

	t.Run("SPIRE entries survive kill and restart", func(t *testing.T) {
		created, err := spire.CreateEntryCLI(ctx, EntrySpec{
			SPIFFEID:   "spiffe://example.org/ns/apps/sa/web",
			ParentID:   "spiffe://example.org/spire/agent/k8s_psat/demo/node-a",
			Selectors:  []string{"k8s:ns:apps", "k8s:sa:web"},
			ExtraFlags: []string{"-dns", "web.apps.svc", "-x509SVIDTTL", "600", "-hint", "web"},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := Entry{SPIFFEID: "spiffe://example.org/ns/apps/sa/web", ParentID: "spiffe://example.org/spire/agent/k8s_psat/demo/node-a",
			Selectors: []Selector{{Type: "k8s", Value: "ns:apps"}, {Type: "k8s", Value: "sa:web"}}, X509SVIDTTL: 600,
			DNSNames: []string{"web.apps.svc"}, Hint: "web"}
		// SPIRE assigns the ID and the creation time.
		assigned := cmpopts.IgnoreFields(Entry{}, "ID", "CreatedAt")
		if diff := cmp.Diff(want, created, assigned, cmpopts.EquateEmpty()); diff != "" || created.ID == "" || created.CreatedAt == 0 {
			t.Fatalf("created entry %+v (-want +got):\n%s", created, diff)
		}
		spire.Kill()
		start := time.Now()
		if err := spire.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("spire-server restarted after SIGKILL in %s", time.Since(start).Round(time.Millisecond))
		entries, err := spire.EntryShow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Fatalf("entries after restart: %+v", entries)
		}
		got := entries[0]
		if diff := cmp.Diff(created, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("entry after restart (-created +got):\n%s", diff)
		}
		if err := spire.DeleteEntryCLI(ctx, got.ID); err != nil {
			t.Fatal(err)
		}
		if entries, err := spire.EntryShow(ctx); err != nil || len(entries) != 0 {
			t.Fatalf("entries after delete: %+v, %v", entries, err)
		}
	})

	t.Run("kube-apiserver restart keeps objects", func(t *testing.T) {
		start := time.Now()
		if err := kube.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("kube-apiserver restarted in %s", time.Since(start).Round(time.Millisecond))
		// The client made before the restart keeps working.
		pod, err := client.CoreV1().Pods("apps").Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod after restart: %v", err)
		}
		if pod.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("phase after restart %q", pod.Status.Phase)
		}
	})
}

func TestStopIsIdempotent(t *testing.T) {
	skipIfShort(t)
	s, err := StartSPIRE(t.Context(), SPIREOptions{TrustDomain: "other.test"})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	if s.TrustDomain() != "other.test" {
		t.Fatalf("trust domain %q", s.TrustDomain())
	}
	for range 2 {
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temporary dir %s left behind: %v", dir, err)
	}
	if err := s.Restart(context.Background()); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}

func TestReadCRDFileRejectsOtherKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readCRDFile(path); err == nil || !strings.Contains(err.Error(), "ConfigMap") {
		t.Fatalf("got %v, want an error naming ConfigMap", err)
	}
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 50 {
		b.WriteString(strings.Repeat("x", i%3) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(tailFile(path, 30), "\n"); got != 30 {
		t.Fatalf("tail has %d lines, want 30", got)
	}
}
