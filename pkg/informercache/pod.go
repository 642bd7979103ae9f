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
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// Pod is a pod as the cache keeps it compactly. It expands to the *corev1.Pod that holds the
// same fields (Expand), which is what templates render from. Its fields are unexported and
// it keeps no metav1.ObjectMeta: one is 248 bytes, most of them fields nobody reads, and the
// cache holds a Pod for every pod of the cluster. Like every field, the shared label map a
// Pod returns must not be modified.
type Pod struct {
	name            string
	uid             types.UID
	resourceVersion string
	creation        metav1.Time
	deletion        *metav1.Time
	// scheduledAt is the last transition time of the pod's PodScheduled condition, which the
	// pod → entry latency starts from; scheduledStatus its status, empty when the pod has no
	// such condition.
	scheduledAt metav1.Time
	labels      *labelSet
	// The strings pods repeat are shared: a handle keeps the shared copy alive, so that the
	// next pod with the same one shares it too.
	namespace, nodeName, serviceAccountName, phase, scheduledStatus unique.Handle[string]
	// generation is the PodProjection generation that made the Pod.
	generation uint32
}

// kept is what a Pod keeps of a pod's metadata and spec: templates whose reach is within it
// render from an expanded Pod exactly as from the whole pod.
var kept = render.CompactPodReach()

// Covers reports whether a Pod keeps every field of the pod that reach holds.
func Covers(reach render.Reach) bool {
	return kept.PodMeta.Covers(reach.PodMeta) && kept.PodSpec.Covers(reach.PodSpec)
}

// Compact returns what the cache keeps of pod, made by the projection generation given.
// pod is not kept, but for the strings the Pod shares with it.
func Compact(pod *corev1.Pod, generation uint32) *Pod {
	scheduled := scheduledCondition(pod)
	p := &Pod{
		name:               pod.Name,
		uid:                pod.UID,
		resourceVersion:    pod.ResourceVersion,
		creation:           pod.CreationTimestamp,
		deletion:           pod.DeletionTimestamp,
		scheduledAt:        scheduled.LastTransitionTime,
		namespace:          unique.Make(pod.Namespace),
		nodeName:           unique.Make(pod.Spec.NodeName),
		serviceAccountName: unique.Make(pod.Spec.ServiceAccountName),
		phase:              unique.Make(string(pod.Status.Phase)),
		scheduledStatus:    unique.Make(string(scheduled.Status)),
		generation:         generation,
	}
	if len(pod.Labels) > 0 {
		p.labels = labelSets.intern(pod.Labels)
	}
	return p
}

// scheduledCondition returns the pod's PodScheduled condition, or a zero one.
func scheduledCondition(pod *corev1.Pod) corev1.PodCondition {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c
		}
	}
	return corev1.PodCondition{}
}

// Name is the pod's name.
func (p *Pod) Name() string { return p.name }

// Namespace is the pod's namespace.
func (p *Pod) Namespace() string { return p.namespace.Value() }

// UID is the pod's UID.
func (p *Pod) UID() types.UID { return p.uid }

// ResourceVersion is the pod's resource version.
func (p *Pod) ResourceVersion() string { return p.resourceVersion }

// Labels are the pod's labels, shared with the other pods that have the same ones.
func (p *Pod) Labels() map[string]string {
	if p.labels == nil {
		return nil
	}
	return p.labels.m
}

// NodeName is the pod's spec.nodeName.
func (p *Pod) NodeName() string { return p.nodeName.Value() }

// ServiceAccountName is the pod's spec.serviceAccountName.
func (p *Pod) ServiceAccountName() string { return p.serviceAccountName.Value() }

// Phase is the pod's status.phase; a finished pod declares no entries.
func (p *Pod) Phase() corev1.PodPhase { return corev1.PodPhase(p.phase.Value()) }

// objectMeta is the metadata the Pod keeps, in a new ObjectMeta that shares the labels.
func (p *Pod) objectMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              p.name,
		Namespace:         p.Namespace(),
		UID:               p.uid,
		ResourceVersion:   p.resourceVersion,
		CreationTimestamp: p.creation,
		DeletionTimestamp: p.deletion,
		Labels:            p.Labels(),
	}
}

// GetObjectMeta makes a Pod a metav1.ObjectMetaAccessor, which is how client-go's store and
// indexers key and index it. It returns a new copy of the metadata on every call: setting its
// fields changes nothing in the Pod, which is never modified.
func (p *Pod) GetObjectMeta() metav1.Object {
	m := p.objectMeta()
	return &m
}

// Expand returns the pod as a *corev1.Pod with the fields the Pod keeps. Its labels are shared
// with the Pod and must not be modified.
func (p *Pod) Expand() *corev1.Pod {
	out := &corev1.Pod{}
	p.ExpandInto(out)
	return out
}

// ExpandInto overwrites out with the pod as Expand returns it, so that a loop over many pods
// can reuse one.
func (p *Pod) ExpandInto(out *corev1.Pod) {
	*out = corev1.Pod{
		ObjectMeta: p.objectMeta(),
		Spec:       corev1.PodSpec{NodeName: p.NodeName(), ServiceAccountName: p.ServiceAccountName()},
		Status:     corev1.PodStatus{Phase: p.Phase()},
	}
	if status := p.scheduledStatus.Value(); status != "" {
		out.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionStatus(status), LastTransitionTime: p.scheduledAt,
		}}
	}
}

// GetObjectKind is part of runtime.Object: a cached pod carries no type metadata.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object. The copy shares the labels and strings, which
// are never modified.
func (p *Pod) DeepCopyObject() runtime.Object {
	out := *p
	out.deletion = p.deletion.DeepCopy()
	return &out
}

// Projected is a pod as the cache keeps it when templates read more of pods than a Pod
// keeps: a *corev1.Pod with only the fields of its projection generation's reach (see
// render.ProjectPod), and that generation.
type Projected struct {
	pod        *corev1.Pod
	generation uint32
}

// GetObjectMeta makes a Projected pod a metav1.ObjectMetaAccessor, which is how client-go's
// store and indexers key and index it.
func (p *Projected) GetObjectMeta() metav1.Object { return &p.pod.ObjectMeta }

// GetObjectKind is part of runtime.Object: a cached pod carries no type metadata.
func (p *Projected) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object.
func (p *Projected) DeepCopyObject() runtime.Object {
	return &Projected{pod: p.pod.DeepCopy(), generation: p.generation}
}
