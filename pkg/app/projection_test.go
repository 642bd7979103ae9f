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

package app

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

func clusterSPIFFEID(name, template string) *spirev1alpha1.ClusterSPIFFEID {
	return &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: template}}
}

// TestPodProjectionWidensWhenATemplateReadsMore runs the pod informer of NewInformerFactories:
// it caches only what the ClusterSPIFFEIDs listed at start read, refuses a pod to a
// ClusterSPIFFEID that reads more, and lists the pods again with that field.
func TestPodProjectionWidensWhenATemplateReadsMore(t *testing.T) {
	cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\n"))
	if err != nil {
		t.Fatal(err)
	}
	bySA := clusterSPIFFEID("by-sa", "spiffe://{{ .TrustDomain }}/sa/{{ .PodSpec.ServiceAccountName }}")
	byHost := clusterSPIFFEID("by-host", "spiffe://{{ .TrustDomain }}/host/{{ .PodSpec.Hostname }}")
	kubeClient := k8sfake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web", UID: "u", Annotations: map[string]string{"a": "b"}},
		Spec:       corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web", Hostname: "web-0"},
	})
	spireClient := spirefake.NewSimpleClientset(bySA)
	kubeInformers, spireInformers := NewInformerFactories(kubeClient, spireClient)
	cc := ControllerContext{Config: cfg, KubeClient: kubeClient, SpireAPIClient: spireClient,
		KubeInformers: kubeInformers, SpireInformers: spireInformers}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		kubeInformers.Shutdown()
	}()

	narrowInformers(cc)
	check := narrowPodProjection(ctx, cc)
	if check == nil {
		t.Fatal("no projection check for the factories of NewInformerFactories")
	}
	pods := kubeInformers.Core().V1().Pods()
	kubeInformers.Start(ctx.Done())
	kubeInformers.WaitForCacheSync(ctx.Done())

	pod, err := pods.Lister().Pods("prod").Get("web")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "web" || pod.Spec.Hostname != "" || pod.Annotations != nil || pod.UID != "u" {
		t.Fatalf("cached pod is not the projection for %s: %+v", bySA.Name, pod)
	}
	compiledSA, compiledHost := render.CompileClusterSPIFFEID(bySA), render.CompileClusterSPIFFEID(byHost)
	if err := check(pod, []*render.ClusterSPIFFEID{compiledSA}); err != nil {
		t.Fatalf("check for the ClusterSPIFFEID the projection was made for: %v", err)
	}
	var notProjected errPodNotProjected
	if err := check(pod, []*render.ClusterSPIFFEID{compiledSA, compiledHost}); !errors.As(err, &notProjected) {
		t.Fatalf("check with a ClusterSPIFFEID that reads the hostname = %v, want errPodNotProjected", err)
	}

	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		pod, err = pods.Lister().Pods("prod").Get("web")
		return err == nil && check(pod, []*render.ClusterSPIFFEID{compiledSA, compiledHost}) == nil, nil
	})
	if err != nil {
		t.Fatalf("the pod informer did not list the pod again with its hostname: %+v", pod)
	}
	if pod.Spec.Hostname != "web-0" || pod.Spec.ServiceAccountName != "web" || pod.Annotations != nil {
		t.Errorf("pod listed again is not the projection for both ClusterSPIFFEIDs: %+v", pod)
	}
}

func TestPodProjectionNeedsItsOwnPodInformer(t *testing.T) {
	cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\n"))
	if err != nil {
		t.Fatal(err)
	}
	embedders := informers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	cc := ControllerContext{Config: cfg, KubeInformers: embedders, SpireAPIClient: spirefake.NewSimpleClientset()}
	narrowInformers(cc)
	if narrowPodProjection(context.Background(), cc) != nil {
		t.Error("an embedder's factory got a pod projection")
	}

	ours, _ := NewInformerFactories(k8sfake.NewClientset(), spirefake.NewSimpleClientset())
	ours.Core().V1().Pods().Informer() // registered before narrowInformers: cannot list again
	cc.KubeInformers = ours
	narrowInformers(cc)
	if narrowPodProjection(context.Background(), cc) != nil {
		t.Error("a pod informer that cannot list again got a narrowed projection")
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Hostname: "h"}, ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{}}}}
	out, _ := projectionOf(ours).transform(pod)
	if got := out.(*corev1.Pod); got.Spec.Hostname != "h" || got.ManagedFields != nil {
		t.Errorf("pod cached by a projection that cannot list again: %+v", got)
	}
	again, _ := projectionOf(ours).transform(out)
	if again != out {
		t.Error("transforming a projection again changed it")
	}
}
