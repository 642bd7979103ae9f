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

// Package podcache is how pods are cached when the templates of the active ClusterSPIFFEIDs
// read no more of a pod than its identity, labels, node and service account, which is what
// nearly every template reads. A *corev1.Pod takes about 1,250 bytes before any of its
// strings, most of them fields nobody reads; a Pod keeps what the entry controller and such
// templates read in about a third of that, and shares what pods repeat (namespaces, nodes,
// service accounts, label sets). At 30k pods the pod cache is most of the controller's memory.
//
// The cache may hold whole pods too (an embedder's informer factory, or templates that read
// more): View and PodOf read either kind.
package podcache

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// Pod is a pod as the cache keeps it compactly. It expands to the *corev1.Pod that holds the
// same fields (Expand), which is what templates render from.
type Pod struct {
	// ObjectMeta holds the name, namespace, UID, resource version, creation and deletion
	// times and labels; nothing else. The labels map is shared with other pods that have the
	// same labels, and, like every field, must not be modified.
	metav1.ObjectMeta
	// Phase is the pod's status.phase; a finished pod declares no entries.
	Phase corev1.PodPhase
	// ScheduledStatus and ScheduledAt are the status and last transition time of the pod's
	// PodScheduled condition, which the pod → entry latency starts from. ScheduledStatus is
	// empty when the pod has no such condition.
	ScheduledStatus corev1.ConditionStatus
	ScheduledAt     metav1.Time
	// Projection is the status message of the pod it expands to: the stamp of the projection
	// that made it (see the app package's podProjection).
	Projection string

	// nodeName and serviceAccountName are the spec fields of the same names.
	nodeName, serviceAccountName unique.Handle[string]
	// namespace, phase, scheduledStatus and labels keep alive the shared copies this pod's
	// strings and labels point to, so that the next pod with the same ones shares them too.
	namespace, phase, scheduledStatus unique.Handle[string]
	labels                            *labelSet
}

// kept is what a Pod keeps of a pod's metadata and spec: templates whose reach is within it
// render from an expanded Pod exactly as from the whole pod.
var kept = render.CompactPodReach()

// Covers reports whether a Pod keeps every field of the pod that reach holds.
func Covers(reach render.Reach) bool {
	return kept.PodMeta.Covers(reach.PodMeta) && kept.PodSpec.Covers(reach.PodSpec)
}

// Compact returns what the cache keeps of pod, made by the projection stamped projection.
// pod is not kept, but for the strings the Pod shares with it.
func Compact(pod *corev1.Pod, projection string) *Pod {
	scheduled := scheduledCondition(pod)
	p := &Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		ScheduledAt:        scheduled.LastTransitionTime,
		Projection:         projection,
		namespace:          unique.Make(pod.Namespace),
		nodeName:           unique.Make(pod.Spec.NodeName),
		serviceAccountName: unique.Make(pod.Spec.ServiceAccountName),
		phase:              unique.Make(string(pod.Status.Phase)),
		scheduledStatus:    unique.Make(string(scheduled.Status)),
	}
	p.Namespace = p.namespace.Value()
	p.Phase = corev1.PodPhase(p.phase.Value())
	p.ScheduledStatus = corev1.ConditionStatus(p.scheduledStatus.Value())
	if len(pod.Labels) > 0 {
		p.labels = labelSets.intern(pod.Labels)
		p.Labels = p.labels.m
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

// NodeName is the pod's spec.nodeName.
func (p *Pod) NodeName() string { return p.nodeName.Value() }

// ServiceAccountName is the pod's spec.serviceAccountName.
func (p *Pod) ServiceAccountName() string { return p.serviceAccountName.Value() }

// Expand returns the pod as a *corev1.Pod with the fields the Pod keeps. Its metadata, labels
// included, is shared with the Pod and must not be modified.
func (p *Pod) Expand() *corev1.Pod {
	out := &corev1.Pod{}
	p.ExpandInto(out)
	return out
}

// ExpandInto overwrites out with the pod as Expand returns it, so that a loop over many pods
// can reuse one.
func (p *Pod) ExpandInto(out *corev1.Pod) {
	*out = corev1.Pod{
		ObjectMeta: p.ObjectMeta,
		Spec:       corev1.PodSpec{NodeName: p.NodeName(), ServiceAccountName: p.ServiceAccountName()},
		Status:     corev1.PodStatus{Phase: p.Phase, Message: p.Projection},
	}
	if p.ScheduledStatus != "" {
		out.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: p.ScheduledStatus, LastTransitionTime: p.ScheduledAt,
		}}
	}
}

// GetObjectKind is part of runtime.Object: a cached pod carries no type metadata.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object. The copy shares the labels, which are never
// modified.
func (p *Pod) DeepCopyObject() runtime.Object {
	out := *p
	out.ObjectMeta = *p.ObjectMeta.DeepCopy()
	out.Labels = p.Labels
	return &out
}
