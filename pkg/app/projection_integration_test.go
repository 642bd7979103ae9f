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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestNewTemplateFieldIsRenderedFromTheWholePod runs the controllers with pods cached as
// projections for a ClusterSPIFFEID that reads only pod names, then creates one that reads the
// pod's hostname and an annotation: its entries must carry them, for the pods cached before
// and after, and no entry must ever be rendered without them. It runs with the factories an
// embedder gets, whose pods are whole, and with the standalone binary's, whose projection is
// compact until the new template reads more than an informercache.Pod keeps.
func TestNewTemplateFieldIsRenderedFromTheWholePod(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	t.Run("whole", func(t *testing.T) { testNewTemplateField(t, false) })
	t.Run("projected", func(t *testing.T) { testNewTemplateField(t, true) })
}

func testNewTemplateField(t *testing.T, projected bool) {
	stack := realcluster.NewStack(t)
	client, spireAPI := stack.Client, stack.SpireAPI
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	td := stack.SPIRE.TrustDomain()

	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	withHost := func(host string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Hostname = host
			p.Annotations = map[string]string{"team": "blue"}
		}
	}
	if _, err := realcluster.CreatePod(ctx, client, "default", "before", node.Name, withHost("host-a")); err != nil {
		t.Fatal(err)
	}
	createClusterSPIFFEID := func(name, template string) {
		t.Helper()
		if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: template},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createClusterSPIFFEID("by-name", "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}")

	cfg, err := config.Parse([]byte("trustDomain: " + td + "\nclusterName: it\nclusterDomain: cluster.local\n" +
		"spireServerSocketPath: " + stack.SPIRE.SocketPath() + "\ngcInterval: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	spireClient, err := app.DialSPIRE(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = spireClient.Close() }()
	kubeInformers, spireInformers := app.NewInformerFactories(client, spireAPI)
	var pods *informercache.PodProjection
	if projected {
		kubeInformers, spireInformers, pods = app.NewProjectedInformerFactories(client, spireAPI)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(runCtx, app.ControllerContext{Config: cfg, KubeClient: client, SpireAPIClient: spireAPI,
			KubeInformers: kubeInformers, SpireInformers: spireInformers, PodProjection: pods, SPIRE: spireClient}, 4, nil)
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
	waitFor("spiffe://" + td + "/pod/before")
	for _, obj := range kubeInformers.Core().V1().Pods().Informer().GetIndexer().List() {
		if _, compact := obj.(*informercache.Pod); compact != projected {
			t.Fatalf("the pod cache holds a %T for a template that reads pod names", obj)
		}
	}

	createClusterSPIFFEID("by-host", `spiffe://{{ .TrustDomain }}/host-{{ .PodSpec.Hostname }}-{{ index .PodMeta.Annotations "team" }}`)
	if _, err := realcluster.CreatePod(ctx, client, "default", "after", node.Name, withHost("host-b")); err != nil {
		t.Fatal(err)
	}
	waitFor("spiffe://"+td+"/pod/before", "spiffe://"+td+"/pod/after",
		"spiffe://"+td+"/host-host-a-blue", "spiffe://"+td+"/host-host-b-blue")
	for _, obj := range kubeInformers.Core().V1().Pods().Informer().GetIndexer().List() {
		if _, wide := obj.(*informercache.Projected); wide != projected {
			t.Errorf("the pod cache holds a %T for a template that reads hostnames and annotations", obj)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for id := range seen {
		if strings.Contains(id, "/host--") || strings.HasSuffix(id, "-") {
			t.Errorf("SPIRE held %s, rendered from a pod without its hostname or annotation", id)
		}
	}
}
