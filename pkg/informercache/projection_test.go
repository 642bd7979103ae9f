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

package informercache

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

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

func namedClusterSPIFFEID(name, template string) *render.ClusterSPIFFEID {
	return render.CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: template}})
}

// projectedFactory is a factory whose pods p projects, its pod informer registered by p.
func projectedFactory(pods ...*corev1.Pod) (informers.SharedInformerFactory, *PodProjection) {
	client := k8sfake.NewClientset()
	for _, pod := range pods {
		_ = client.Tracker().Add(pod)
	}
	p := NewPodProjection()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(p.Transform))
	p.RegisterInformer(factory, metav1.NamespaceAll, func(*metav1.ListOptions) {})
	return factory, p
}

// TestPodProjectionWidensWhenATemplateReadsMore: narrowed to what one ClusterSPIFFEID reads,
// the cache holds compact pods, refuses a pod to a ClusterSPIFFEID that reads more, and lists
// the pods again with that field.
func TestPodProjectionWidensWhenATemplateReadsMore(t *testing.T) {
	bySA := namedClusterSPIFFEID("by-sa", "spiffe://{{ .TrustDomain }}/sa/{{ .PodSpec.ServiceAccountName }}")
	byHost := namedClusterSPIFFEID("by-host", "spiffe://{{ .TrustDomain }}/host/{{ .PodSpec.Hostname }}")
	factory, p := projectedFactory(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web", UID: "u", Annotations: map[string]string{"a": "b"}},
		Spec:       corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web", Hostname: "web-0"},
	})
	p.Narrow(bySA.Reach)
	// Every controller sharing the cache narrows it; only the first call counts, and the others
	// compute no reach (it lists ClusterSPIFFEIDs from the API server).
	p.Narrow(func() render.Reach { t.Error("a second Narrow computed its reach"); return render.Reach{} })
	informer := factory.Core().V1().Pods().Informer()
	lister, err := NewPodLister(informer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	view, ok := lister.ByName("prod", "web")
	if !ok {
		t.Fatal("the pod is not cached")
	}
	if _, compact := informer.GetStore().List()[0].(*Pod); !compact {
		t.Fatalf("the cached pod is a %T, want a compact Pod for %s", informer.GetStore().List()[0], bySA.Name)
	}
	if pod := view.Pod(); pod.Spec.ServiceAccountName != "web" || pod.Spec.Hostname != "" || pod.Annotations != nil || pod.UID != "u" {
		t.Fatalf("cached pod is not the projection for %s: %+v", bySA.Name, pod)
	}
	if err := p.Check(view, []*render.ClusterSPIFFEID{bySA}); err != nil {
		t.Fatalf("check for the ClusterSPIFFEID the projection was made for: %v", err)
	}
	var notProjected NotProjectedError
	if err := p.Check(view, []*render.ClusterSPIFFEID{bySA, byHost}); !errors.As(err, &notProjected) || notProjected.ClusterSPIFFEID != byHost.Name {
		t.Fatalf("check with a ClusterSPIFFEID that reads the hostname = %v, want a NotProjectedError naming it", err)
	}

	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		view, ok = lister.ByName("prod", "web")
		return ok && p.Check(view, []*render.ClusterSPIFFEID{bySA, byHost}) == nil, nil
	})
	if err != nil {
		t.Fatalf("the pod informer did not list the pod again with its hostname: %+v", view)
	}
	if _, projected := informer.GetStore().List()[0].(*Projected); !projected {
		t.Errorf("the pod listed again is a %T, want a Projected pod", informer.GetStore().List()[0])
	}
	if pod := view.Pod(); pod.Spec.Hostname != "web-0" || pod.Spec.ServiceAccountName != "web" || pod.Annotations != nil {
		t.Errorf("pod listed again is not the projection for both ClusterSPIFFEIDs: %+v", pod)
	}
}

// TestPodProjectionNeedsItsOwnPodInformer: a pod informer registered before the projection's
// cannot list again, so its pods keep all templates can see and are never refused.
func TestPodProjectionNeedsItsOwnPodInformer(t *testing.T) {
	p := NewPodProjection()
	factory := informers.NewSharedInformerFactoryWithOptions(k8sfake.NewClientset(), 0, informers.WithTransform(p.Transform))
	factory.Core().V1().Pods().Informer()
	p.RegisterInformer(factory, metav1.NamespaceAll, func(*metav1.ListOptions) {})
	byHost := namedClusterSPIFFEID("by-host", "spiffe://{{ .TrustDomain }}/host/{{ .PodSpec.Hostname }}")
	p.Narrow(func() render.Reach { t.Error("Narrow computed a reach it cannot use"); return byHost.Reach() })

	pod := &corev1.Pod{Spec: corev1.PodSpec{Hostname: "h"}, ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{}}}}
	out, _ := p.Transform(pod)
	projected, ok := out.(*Projected)
	if !ok || projected.pod.Spec.Hostname != "h" || projected.pod.Annotations == nil || projected.pod.ManagedFields != nil {
		t.Fatalf("pod cached by a projection that cannot list again: %+v", out)
	}
	if again, _ := p.Transform(out); again != out {
		t.Error("transforming a projection again changed it")
	}
	view, _ := ViewOf(out)
	readsManagedFields := namedClusterSPIFFEID("odd", "spiffe://{{ .TrustDomain }}/{{ len .PodMeta.ManagedFields }}")
	if err := p.Check(view, []*render.ClusterSPIFFEID{byHost, readsManagedFields}); err != nil {
		t.Errorf("check by a projection that cannot list again: %v", err)
	}
	var none *PodProjection
	if err := none.Check(view, []*render.ClusterSPIFFEID{readsManagedFields}); err != nil {
		t.Errorf("check without a projection: %v", err)
	}
}
