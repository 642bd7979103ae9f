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
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// richPod sets more of a pod than the cache keeps, so that what it drops shows.
func richPod(name string, labels map[string]string) *corev1.Pod {
	deleted := metav1.NewTime(time.Unix(1_700_000_100, 0))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "42", Generation: 3,
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0)), DeletionTimestamp: &deleted,
			Labels: labels, Annotations: map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "rs",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", ServiceAccountName: "web", Hostname: "h", NodeSelector: map[string]string{"zone": "a"},
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

// TestTrimmedPodIsTheCachedPod: the transform keeps of a pod exactly render.CachedPod, which
// render's tests prove renders as the whole pod for every template that reads only it.
func TestTrimmedPodIsTheCachedPod(t *testing.T) {
	pod := richPod("web-1", map[string]string{"app": "web"})
	want := render.CachedPod(pod.DeepCopy())
	got, err := NewTrim()(pod)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed pod (-render.CachedPod +trimmed):\n%s", diff)
	}
}

func TestTrimmedPodsShareWhatTheyRepeat(t *testing.T) {
	trim := NewTrim()
	pod := func(name, hash string) *corev1.Pod {
		return trimPod(t, trim, richPod(name, map[string]string{"app": "web", "pod-template-hash": hash}))
	}
	a, b, c := pod("a", "1"), pod("b", "1"), pod("c", "2")
	if mapObject(a.Labels) != mapObject(b.Labels) || mapObject(a.Annotations) != mapObject(b.Annotations) ||
		mapObject(a.Spec.NodeSelector) != mapObject(b.Spec.NodeSelector) {
		t.Error("two pods with equal labels, annotations and node selectors do not share them")
	}
	if mapObject(a.Labels) == mapObject(c.Labels) {
		t.Error("pods with different labels share them")
	}
	if a.OwnerReferences[0].Controller != b.OwnerReferences[0].Controller || !*a.OwnerReferences[0].Controller ||
		*a.OwnerReferences[0].BlockOwnerDeletion {
		t.Errorf("owner flags not shared, or changed: %+v", a.OwnerReferences[0])
	}
	// Another cache shares nothing with this one.
	other := trimPod(t, NewTrim(), richPod("d", map[string]string{"app": "web", "pod-template-hash": "1"}))
	if mapObject(other.Labels) == mapObject(a.Labels) {
		t.Error("two caches share a label map")
	}
}

func trimPod(t *testing.T, trim func(any) (any, error), pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := trim(pod)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Pod)
}

func TestUnusedMapsAreForgotten(t *testing.T) {
	trim := &trimmer{maps: newMapInterner()}
	interned := func() int {
		trim.maps.mu.Lock()
		defer trim.maps.mu.Unlock()
		n := 0
		for _, ws := range trim.maps.maps {
			n += len(ws)
		}
		return n
	}
	// The pods live only inside this function.
	func() {
		pods := make([]*corev1.Pod, 100)
		for i := range pods {
			p := richPod("p", map[string]string{"a": string(rune('a' + i%26)), "n": string(rune('a' + i/26))})
			p.Annotations, p.Spec.NodeSelector = nil, nil
			pods[i] = trim.pod(p)
		}
		if got := interned(); got != 100 {
			t.Fatalf("%d maps interned for 100 pods with distinct labels", got)
		}
		runtime.KeepAlive(pods)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for interned() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d maps still interned after their pods are gone", interned())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSameForEntries(t *testing.T) {
	trim := NewTrim()
	base := func() *corev1.Pod { return richPod("web-1", map[string]string{"app": "web"}) }
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		same   bool
	}{
		{"status only", func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.2"; p.Status.Conditions[0].Status = "False" }, true},
		{"resource version", func(p *corev1.Pod) { p.ResourceVersion = "43" }, true},
		{"labels", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }, false},
		{"annotations", func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "y"} }, false},
		{"phase", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
		{"node", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }, false},
		{"hostname", func(p *corev1.Pod) { p.Spec.Hostname = "other" }, false},
		// The API server bumps the generation on any spec change, also of what the cache drops.
		{"image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:2"; p.Generation++ }, false},
		{"another pod of the name", func(p *corev1.Pod) { p.UID = "other" }, false},
	} {
		changed := base()
		tc.change(changed)
		if got := SameForEntries(trimPod(t, trim, base()), trimPod(t, trim, changed)); got != tc.same {
			t.Errorf("%s: cached pods same = %v, want %v", tc.name, got, tc.same)
		}
	}
}
