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
	"unique"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// pod keeps of a pod render.CachedPod: its metadata but managedFields, the spec fields
// templates read from the cache, its phase and PodScheduled condition. Its labels,
// annotations and node selector are shared with the other cached pods that have the same, and
// so are the strings and flags pods repeat (namespace, owner, node, service account...). Like
// everything in a cache, the pod and what it points to must not be modified.
func (t *trimmer) pod(pod *corev1.Pod) *corev1.Pod {
	out := render.CachedPod(pod)
	m, s := &out.ObjectMeta, &out.Spec
	m.Labels, m.Annotations, s.NodeSelector = t.maps.intern(m.Labels), t.maps.intern(m.Annotations), t.maps.intern(s.NodeSelector)
	for _, str := range []*string{&m.Namespace, &m.GenerateName, &s.NodeName, &s.ServiceAccountName, &s.DeprecatedServiceAccount,
		&s.Subdomain, &s.SchedulerName, &s.PriorityClassName, (*string)(&out.Status.Phase)} {
		*str = intern(*str)
	}
	for i := range m.OwnerReferences {
		ref := &m.OwnerReferences[i]
		ref.APIVersion, ref.Kind, ref.Name = intern(ref.APIVersion), intern(ref.Kind), intern(ref.Name)
		ref.Controller, ref.BlockOwnerDeletion = sharedFlag(ref.Controller), sharedFlag(ref.BlockOwnerDeletion)
	}
	for i := range out.Status.Conditions {
		c := &out.Status.Conditions[i]
		c.Type, c.Status = corev1.PodConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status)))
	}
	return out
}

// intern returns s sharing its bytes with the other strings equal to it interned lately.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

var sharedFlags = [2]bool{false, true}

// sharedFlag returns a pointer to a bool of the same value that every pod shares.
func sharedFlag(b *bool) *bool {
	if b == nil {
		return nil
	}
	if *b {
		return &sharedFlags[1]
	}
	return &sharedFlags[0]
}

// SameForEntries reports whether two versions of a cached pod give the same entries: their
// labels, annotations, owners, cached spec, generation and phase are equal. The API server
// bumps a pod's generation on any change of its spec, also of the fields the cache does not
// keep (a container's image, say), which templates that read the whole pod read. Status-only
// updates, most of a running pod's, are the same.
func SameForEntries(oldPod, newPod *corev1.Pod) bool {
	return oldPod.UID == newPod.UID && oldPod.Generation == newPod.Generation && oldPod.Status.Phase == newPod.Status.Phase &&
		maps.Equal(oldPod.Labels, newPod.Labels) &&
		maps.Equal(oldPod.Annotations, newPod.Annotations) &&
		apiequality.Semantic.DeepEqual(oldPod.Spec, newPod.Spec) &&
		apiequality.Semantic.DeepEqual(oldPod.OwnerReferences, newPod.OwnerReferences)
}
