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
	"maps"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// View is what the controllers read of a cached pod, of any kind, without expanding it: its
// identity, labels, node and phase. The labels are the cache's and must not be modified.
type View struct {
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
	Labels          map[string]string
	NodeName        string
	Phase           corev1.PodPhase

	whole   *corev1.Pod
	compact *Pod
	// projected says the pod keeps only what its projection generation's reach holds.
	projected  bool
	generation uint32
}

// ViewOf returns the view of a pod the cache holds, of any kind (a *corev1.Pod, a Pod or a
// Projected pod), also inside a tombstone of a delete event; false for anything else.
func ViewOf(obj any) (View, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	switch p := obj.(type) {
	case *corev1.Pod:
		return View{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, NodeName: p.Spec.NodeName, Phase: p.Status.Phase, whole: p}, true
	case *Pod:
		return View{Namespace: p.Namespace(), Name: p.name, UID: p.uid, ResourceVersion: p.resourceVersion,
			Labels: p.Labels(), NodeName: p.NodeName(), Phase: p.Phase(), compact: p, projected: true, generation: p.generation}, true
	case *Projected:
		v, _ := ViewOf(p.pod)
		v.projected, v.generation = true, p.generation
		return v, true
	}
	return View{}, false
}

// Pod returns the pod to render from: the cached one when it is whole, else a new expansion.
func (v View) Pod() *corev1.Pod {
	if v.whole != nil {
		return v.whole
	}
	return v.compact.Expand()
}

// PodInto is Pod, but expands a compact pod into scratch, which it returns, instead of
// allocating: the pod is only valid until scratch is used again.
func (v View) PodInto(scratch *corev1.Pod) *corev1.Pod {
	if v.whole != nil {
		return v.whole
	}
	v.compact.ExpandInto(scratch)
	return scratch
}

// SameForEntries reports whether two versions of a cached pod give the same entries: they
// were projected alike, and their labels, annotations, owners, spec and phase are equal,
// which is all templates and the controller read of a pod. Status-only updates, most of a
// running pod's, are. A pod listed again for a wider projection is not.
func SameForEntries(oldObj, newObj any) bool {
	oldPod, okOld := oldObj.(*Pod)
	newPod, okNew := newObj.(*Pod)
	if okOld && okNew {
		return oldPod.sameForEntries(newPod)
	}
	oldView, okOld := ViewOf(oldObj)
	newView, okNew := ViewOf(newObj)
	if !okOld || !okNew || oldView.projected != newView.projected || oldView.generation != newView.generation {
		return false
	}
	return sameWholeForEntries(oldView.Pod(), newView.Pod())
}

// sameForEntries compares what a Pod keeps that entries depend on. Label sets are shared, so
// equal labels are the same set.
func (p *Pod) sameForEntries(o *Pod) bool {
	return p.uid == o.uid && p.labels == o.labels && p.phase == o.phase && p.nodeName == o.nodeName &&
		p.serviceAccountName == o.serviceAccountName
}

// sameWholeForEntries compares what templates can read of two whole pods, and their phase.
func sameWholeForEntries(oldPod, newPod *corev1.Pod) bool {
	return oldPod.UID == newPod.UID && oldPod.Status.Phase == newPod.Status.Phase &&
		maps.Equal(oldPod.Labels, newPod.Labels) &&
		maps.Equal(oldPod.Annotations, newPod.Annotations) &&
		apiequality.Semantic.DeepEqual(oldPod.Spec, newPod.Spec) &&
		apiequality.Semantic.DeepEqual(oldPod.OwnerReferences, newPod.OwnerReferences)
}
