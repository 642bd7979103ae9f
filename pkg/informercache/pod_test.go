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
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// richPod sets more of a pod than a Pod keeps, so that what it drops shows.
func richPod(name string, labels map[string]string) *corev1.Pod {
	deleted := metav1.NewTime(time.Unix(1_700_000_100, 0))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "42", Generation: 3,
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0)), DeletionTimestamp: &deleted,
			Labels: labels, Annotations: map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-abc"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", ServiceAccountName: "web", Hostname: "h",
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Reason: "r", Message: "m",
					LastTransitionTime: metav1.NewTime(time.Unix(1_700_000_050, 0))},
			},
		},
	}
}

// TestExpandIsTheCompactProjection: a Pod expands to the projection to render.CompactPodReach,
// which TestCompactPodReachRendersAsTheFullPod proves renders as the whole pod, with what the
// controller reads of its status: the phase, the PodScheduled condition's status and time,
// and nothing of its projection.
func TestExpandIsTheCompactProjection(t *testing.T) {
	pod := richPod("web-1", map[string]string{"app": "web"})
	want := render.ProjectPod(pod, render.CompactPodReach())
	want.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: pod.Status.Conditions[1].LastTransitionTime}}
	if diff := cmp.Diff(want, Compact(pod, 3).Expand()); diff != "" {
		t.Errorf("Expand (-want +got):\n%s", diff)
	}

	unscheduled := richPod("web-2", nil)
	unscheduled.Spec.NodeName, unscheduled.Status.Conditions = "", nil
	got := Compact(unscheduled, 0).Expand()
	if got.Status.Conditions != nil || got.Spec.NodeName != "" || got.Labels != nil {
		t.Errorf("an unscheduled pod without labels expands to conditions %v, node %q, labels %v",
			got.Status.Conditions, got.Spec.NodeName, got.Labels)
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		template string
		want     bool
	}{
		{"spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}", true},
		{`spiffe://x/{{ index .PodMeta.Labels "app" }}/{{ .PodMeta.UID }}/{{ .NodeMeta.Annotations }}`, true},
		{"spiffe://x/{{ .PodSpec.Hostname }}", false},
		{"spiffe://x/{{ .PodMeta.Annotations }}", false},
		{"spiffe://x/{{ .PodMeta }}", false},
		{"spiffe://x/{{ .PodSpec }}", false},
	} {
		c := render.CompileClusterSPIFFEID(clusterSPIFFEID(tc.template))
		if c.Err != nil {
			t.Fatalf("%s: %v", tc.template, c.Err)
		}
		if got := Covers(c.Reach()); got != tc.want {
			t.Errorf("Covers(reach of %s) = %v, want %v", tc.template, got, tc.want)
		}
	}
}

func TestPodsWithTheSameLabelsShareThem(t *testing.T) {
	a := Compact(richPod("a", map[string]string{"app": "web", "pod-template-hash": "1"}), 0)
	b := Compact(richPod("b", map[string]string{"pod-template-hash": "1", "app": "web"}), 0)
	c := Compact(richPod("c", map[string]string{"app": "web", "pod-template-hash": "2"}), 0)
	if reflect.ValueOf(a.Labels()).UnsafePointer() != reflect.ValueOf(b.Labels()).UnsafePointer() {
		t.Error("two pods with equal labels do not share them")
	}
	if reflect.ValueOf(a.Labels()).UnsafePointer() == reflect.ValueOf(c.Labels()).UnsafePointer() {
		t.Error("pods with different labels share them")
	}
	if a.NodeName() != "node-1" || a.ServiceAccountName() != "web" || a.Namespace() != "shop" {
		t.Errorf("node %q, service account %q, namespace %q", a.NodeName(), a.ServiceAccountName(), a.Namespace())
	}
}

func TestUnusedLabelSetsAreForgotten(t *testing.T) {
	// Other tests' sets come and go with the collector, so count only this test's own.
	ours := func() int {
		labelSets.mu.Lock()
		defer labelSets.mu.Unlock()
		n := 0
		for key := range labelSets.sets {
			if strings.HasPrefix(key, "forgotten\x00") {
				n++
			}
		}
		return n
	}
	// The pods live only inside this function.
	func() {
		pods := make([]*Pod, 100)
		for i := range pods {
			pods[i] = Compact(richPod("p", map[string]string{"forgotten": string(rune('a' + i%26)), "n": string(rune('a' + i/26))}), 0)
		}
		if got := ours(); got != 100 {
			t.Fatalf("%d label sets interned for 100 pods with distinct labels", got)
		}
		runtime.KeepAlive(pods)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for ours() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d label sets still interned after their pods are gone", ours())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientGoKeysAndIndexesCompactPods: client-go's store keys a Pod, and its namespace
// index and the informer read its resource version, through the metadata it hands out.
func TestClientGoKeysAndIndexesCompactPods(t *testing.T) {
	pod := Compact(richPod("web-1", map[string]string{"app": "web"}), 0)
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := store.Add(pod); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := store.GetByKey("shop/web-1"); err != nil || !ok || got != pod {
		t.Errorf("GetByKey(shop/web-1) = %v, %v, %v; want the pod", got, ok, err)
	}
	if got, err := store.ByIndex(cache.NamespaceIndex, "shop"); err != nil || len(got) != 1 {
		t.Errorf("ByIndex(namespace, shop) = %v, %v; want the pod", got, err)
	}
	m, err := meta.Accessor(pod)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetResourceVersion() != "42" || m.GetUID() != "uid-web-1" || m.GetDeletionTimestamp() == nil {
		t.Errorf("metadata %+v", m)
	}
	// Setting a field of the copy leaves the cached pod as it was.
	m.SetName("other")
	if pod.Name() != "web-1" {
		t.Errorf("setting the name of its metadata renamed the pod to %q", pod.Name())
	}
}

// TestPodSize keeps a Pod within the 160-byte size class: the cache holds one per pod.
func TestPodSize(t *testing.T) {
	if size := unsafe.Sizeof(Pod{}); size > 160 {
		t.Errorf("Pod takes %d bytes, want at most 160", size)
	}
}

func TestViewOf(t *testing.T) {
	whole := richPod("web-1", map[string]string{"app": "web"})
	compact := Compact(whole, 0)
	for name, obj := range map[string]any{
		"whole":     whole,
		"compact":   compact,
		"projected": &Projected{pod: whole, generation: 1},
		"tombstone": cache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: compact},
	} {
		v, ok := ViewOf(obj)
		if !ok {
			t.Fatalf("%s: no view", name)
		}
		if v.UID != whole.UID || v.Namespace != "shop" || v.Name != whole.Name || v.ResourceVersion != "42" ||
			v.NodeName != "node-1" || v.Phase != corev1.PodRunning || v.Labels["app"] != "web" {
			t.Errorf("%s: view %+v", name, v)
		}
		if got := v.Pod(); got.Spec.ServiceAccountName != "web" || got.UID != whole.UID {
			t.Errorf("%s: Pod() = %+v", name, got)
		}
		var scratch corev1.Pod
		if got := v.PodInto(&scratch); got.Spec.ServiceAccountName != "web" {
			t.Errorf("%s: PodInto() = %+v", name, got)
		}
	}
	if v := (View{whole: whole}); v.Pod() != whole {
		t.Error("the view of a whole pod expands it instead of returning it")
	}
	if v, _ := ViewOf(&Projected{pod: whole, generation: 1}); v.Pod() != whole || !v.projected || v.generation != 1 {
		t.Errorf("the view of a projected pod is %+v, want its pod, projected, generation 1", v)
	}
	if _, ok := ViewOf(&corev1.Node{}); ok {
		t.Error("a node has a pod view")
	}
}

func TestSameForEntries(t *testing.T) {
	base := func() *corev1.Pod { return richPod("web-1", map[string]string{"app": "web"}) }
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		same   bool
	}{
		{"status only", func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.2"; p.Status.Conditions[0].Status = "False" }, true},
		{"resource version", func(p *corev1.Pod) { p.ResourceVersion = "43" }, true},
		{"labels", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }, false},
		{"phase", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
		{"node", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }, false},
		{"service account", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "db" }, false},
		{"another pod of the name", func(p *corev1.Pod) { p.UID = "other" }, false},
	} {
		changed := base()
		tc.change(changed)
		if got := SameForEntries(Compact(base(), 0), Compact(changed, 0)); got != tc.same {
			t.Errorf("%s: compact pods same = %v, want %v", tc.name, got, tc.same)
		}
		if got := SameForEntries(base(), changed); got != tc.same {
			t.Errorf("%s: whole pods same = %v, want %v", tc.name, got, tc.same)
		}
	}
	// Whole pods also differ in what only they keep.
	hostname := base()
	hostname.Spec.Hostname = "other"
	if SameForEntries(base(), hostname) {
		t.Error("whole pods with different hostnames are the same")
	}
	// A relist after the projection widened pairs a compact version with a wider one.
	if SameForEntries(Compact(base(), 0), base()) {
		t.Error("a compact pod and the whole pod it came from are the same for entries")
	}
	wide := &Projected{pod: base(), generation: 2}
	if SameForEntries(Compact(base(), 1), wide) {
		t.Error("a compact pod and a projection of it for a wider reach are the same for entries")
	}
	if SameForEntries(&Projected{pod: base(), generation: 1}, wide) {
		t.Error("two projections of one pod for different reaches are the same for entries")
	}
	if !SameForEntries(&Projected{pod: base(), generation: 2}, wide) {
		t.Error("two equal projections of one pod differ for entries")
	}
}

func clusterSPIFFEID(template string) *spirev1alpha1.ClusterSPIFFEID {
	return &spirev1alpha1.ClusterSPIFFEID{Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: template}}
}
