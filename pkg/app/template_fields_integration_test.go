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

package app_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// defaultTemplate is the SPIFFE ID template of spire-controller-manager's documentation and
	// of the official chart's default ClusterSPIFFEID.
	defaultTemplate = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"
	// imageTemplate reads a field the pod cache does not keep.
	imageTemplate = "spiffe://{{ .TrustDomain }}/image/{{ (index .PodSpec.Containers 0).Image }}"
)

// TestClusterSPIFFEIDCreatedAfterItsPods runs the controllers on the real API server with pods
// that exist before any ClusterSPIFFEID, then creates ClusterSPIFFEIDs for them:
//
//   - one of the default template, which reads only what the pod cache keeps: its pods get
//     their entries from the cache, with no pod read from the API server and no sync retried;
//   - one whose SPIFFE ID template reads a container's image, which the cache does not keep:
//     its pods get the IDs spire-controller-manager renders from the whole pod, each read whole
//     from the API server, and no entry is ever rendered without the image.
func TestClusterSPIFFEIDCreatedAfterItsPods(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	metrics.SetWorkqueueProvider()
	stack := realcluster.NewStack(t)
	client, spireAPI := stack.Client, stack.SpireAPI
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	td := stack.SPIRE.TrustDomain()

	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for _, p := range []struct{ name, app, image string }{
		{"plain-1", "plain", realcluster.PlaceholderImage}, {"plain-2", "plain", realcluster.PlaceholderImage},
		{"img-1", "img", "registry.example/shop/cart"}, {"img-2", "img", "registry.example/shop/checkout"},
		{"sentinel", "sentinel", realcluster.PlaceholderImage},
	} {
		pod, err := realcluster.CreatePod(ctx, client, "default", p.name, node.Name, func(pod *corev1.Pod) {
			pod.Labels = map[string]string{"app": p.app}
			pod.Spec.Containers[0].Image = p.image
		})
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod)
	}
	createClusterSPIFFEID := func(name, app, template string) {
		t.Helper()
		if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: template,
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	cfg, err := config.Parse([]byte("trustDomain: " + td + "\nclusterName: it\nclusterDomain: cluster.local\n" +
		"spireServerSocketPath: " + stack.SPIRE.SocketPath() + "\ngcInterval: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	spireClient, err := app.DialSPIRE(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = spireClient.Close() }()
	kubeInformers, spireInformers := app.NewInformerFactories(client, spireAPI)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(runCtx, app.ControllerContext{Config: cfg, KubeClient: client, SpireAPIClient: spireAPI,
			KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: spireClient}, 4, nil)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("app.Run: %v", err)
		}
	}()

	var mu sync.Mutex
	seen := map[string]bool{}
	ids := func(ctx context.Context) []string {
		entries, err := stack.SPIRE.EntryShow(ctx)
		if err != nil {
			return nil
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.SPIFFEID)
		}
		slices.Sort(got)
		mu.Lock()
		for _, id := range got {
			seen[id] = true
		}
		mu.Unlock()
		return got
	}
	waitFor := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		var got []string
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got = ids(ctx)
			return slices.Equal(got, want), nil
		}); err != nil {
			t.Fatalf("SPIRE holds %v, want %v", got, want)
		}
	}
	// Once the sentinel has its entry, the controllers run with every pod in their cache.
	createClusterSPIFFEID("sentinel", "sentinel", "spiffe://{{ .TrustDomain }}/sentinel")
	want := []string{"spiffe://" + td + "/sentinel"}
	waitFor(want...)

	reads, retries := wholePodReads(t), podSyncRetries(t)
	createClusterSPIFFEID("default", "plain", defaultTemplate)
	want = append(want, "spiffe://"+td+"/ns/default/sa/default", "spiffe://"+td+"/ns/default/sa/default")
	waitFor(want...)
	if got := wholePodReads(t) - reads; got != 0 {
		t.Errorf("the default template read %v pods whole, want none", got)
	}
	if got := podSyncRetries(t) - retries; got != 0 {
		t.Errorf("%v pod syncs were retried for a ClusterSPIFFEID of the default template, want none", got)
	}

	reads = wholePodReads(t)
	createClusterSPIFFEID("by-image", "img", imageTemplate)
	for _, pod := range pods {
		if pod.Labels["app"] == "img" {
			want = append(want, scmRender(t, imageTemplate, td, pod))
		}
	}
	if !slices.Contains(want, "spiffe://"+td+"/image/registry.example/shop/cart") {
		t.Fatalf("spire-controller-manager's rendering gives %v", want)
	}
	waitFor(want...)
	if got := wholePodReads(t) - reads; got < 2 {
		t.Errorf("the image template read %v pods whole, want one for each of its 2 pods", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for id := range seen {
		if strings.Contains(id, "/image/") && !slices.Contains(want, id) {
			t.Errorf("SPIRE held %s, rendered from a pod without its image", id)
		}
	}
}

// scmRender renders a SPIFFE ID template over the whole pod as spire-controller-manager v0.7.0
// does: text/template over pointers to the pod's metadata and spec.
func scmRender(t *testing.T, text, trustDomain string, pod *corev1.Pod) string {
	t.Helper()
	tmpl, err := template.New("t").Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, struct {
		TrustDomain string
		PodMeta     *metav1.ObjectMeta
		PodSpec     *corev1.PodSpec
	}{trustDomain, &pod.ObjectMeta, &pod.Spec}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// wholePodReads is how many pods the controllers read whole from the API server.
func wholePodReads(t *testing.T) float64 {
	return counter(t, "spire_registrar_whole_pod_reads_total", "result", "found")
}

// podSyncRetries is how many pod syncs failed and were queued again.
func podSyncRetries(t *testing.T) float64 {
	return counter(t, "spire_registrar_workqueue_retries_total", "name", "spire_registrar_pods")
}

// counter reads the counter of metrics.Registry named name with the label given, 0 when absent.
func counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
