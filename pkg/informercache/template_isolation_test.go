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
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// hostileTemplates call the methods the objects templates used to render over offered, with
// the arguments that changed or exhausted them: a quantity made a decimal (AsDec changes the
// quantity it is called on), its big integer's bits set and shifted, a time's fields. Those
// that read the spec fields the cache keeps run over the maps cached pods share.
var hostileTemplates = []string{
	`{{ $q := (index .PodSpec.Volumes 0).EmptyDir.SizeLimit }}{{ $b := $q.AsDec.UnscaledBig }}{{ $x := $b.SetBit $b 100000 1 }}`,
	`{{ $q := (index .PodSpec.Volumes 0).EmptyDir.SizeLimit }}{{ $x := $q.AsDec.UnscaledBig.Lsh $q.AsDec.UnscaledBig 100000 }}`,
	`{{ $q := (index .PodSpec.Volumes 0).EmptyDir.SizeLimit }}{{ $x := $q.ScaledValue 9 }}{{ $y := $q.RoundUp 3 }}`,
	`{{ $q := (index .PodSpec.Volumes 0).EmptyDir.SizeLimit }}{{ $x := $q.Neg }}{{ $y := $q.Add $q }}`,
	`{{ $x := (index (index .PodSpec.Containers 0).Ports 0).Name }}{{ $y := .PodMeta.CreationTimestamp.Unix }}`,
	`{{ $x := .PodMeta.DeepCopy }}{{ $y := .PodSpec.Marshal }}{{ $z := .PodMeta.Reset }}`,
	`{{ $x := .PodMeta.SetLabels nil }}{{ $y := .PodMeta.SetName "changed" }}`,
	`{{ range .PodSpec.Containers }}{{ $x := .Resources.Limits.cpu.AsDec }}{{ end }}`,
	`spiffe://example.org/{{ .PodMeta.Labels }}{{ printf "%v%s" .PodSpec .PodMeta }}{{ .PodSpec.Overhead }}`,
	`spiffe://example.org/{{ range $k, $v := .PodMeta.Annotations }}{{ $k }}{{ end }}{{ (index .PodMeta.OwnerReferences 0).Name }}{{ .PodSpec.NodeSelector }}`,
}

// cachedPod is a pod with the fields the hostile templates reach.
func cachedPod(i int) *corev1.Pod {
	limit := resource.MustParse("1Gi")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "shop", UID: types.UID(fmt.Sprint("uid-", i)), ResourceVersion: "1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "blue"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", UID: "rs"}},
			CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0))},
		Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "web", NodeSelector: map[string]string{"zone": "a"},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}},
			Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
				Resources:     corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
			Overhead: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10Mi")},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// TestTemplatesCannotChangeCachedPods renders the hostile templates, and ordinary ones, over
// the pods an informer store holds through this package's transform, which share their maps,
// then compares every cached object with a copy taken before: no template can change what
// other ClusterSPIFFEIDs render, because none reads the cache.
func TestTemplatesCannotChangeCachedPods(t *testing.T) {
	trim := NewTrim()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for i := range 20 {
		obj, err := trim(cachedPod(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]any{}
	for _, obj := range store.List() {
		pod := obj.(*corev1.Pod)
		before[pod.Namespace+"/"+pod.Name] = pod.DeepCopy()
	}

	r, err := render.NewRenderer(render.Settings{TrustDomain: spiffeid.RequireTrustDomainFromString("example.org"),
		ClusterName: "demo", ClusterDomain: "cluster.local", ParentIDTemplate: config.DefaultParentIDTemplate})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}}
	templates := append([]string{"spiffe://example.org/ns/{{ .PodMeta.Namespace }}/{{ range .PodSpec.Containers }}{{ .Name }}{{ end }}"}, hostileTemplates...)
	for _, tmpl := range templates {
		c := render.CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "hostile", UID: "u"},
			Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://example.org/x" + tmpl, DNSNameTemplates: []string{tmpl}}})
		for _, obj := range store.List() {
			_, _ = r.PodEntry(c, obj.(*corev1.Pod), node, nil)
		}
	}
	for _, obj := range store.List() {
		after := obj.(*corev1.Pod)
		want := before[after.Namespace+"/"+after.Name]
		if !reflect.DeepEqual(want, after) {
			t.Errorf("rendering changed the cached pod %s/%s (-before +after):\n%s", after.Namespace, after.Name,
				cmp.Diff(want, after, cmp.Exporter(func(reflect.Type) bool { return true })))
		}
	}
}
