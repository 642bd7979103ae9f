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

package render

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The pod cache (pkg/informercache) keeps one fixed part of every pod, CachedPod: what the
// controllers read, and what nearly every template reads. A ClusterSPIFFEID whose templates
// read more of a pod (ReadsUncachedPodFields) renders from the pod read whole from the API
// server. Both sides come from cachedPodSpecFields.

// cachedPodSpecFields are the fields of a pod's spec the cache keeps: the node, service
// account, host and scheduling names, the node selector and host networking. The rest
// (containers, volumes, affinity, tolerations...) is most of a pod, and differs from pod to pod.
var cachedPodSpecFields = sets.New("NodeName", "ServiceAccountName", "DeprecatedServiceAccount", "Hostname",
	"Subdomain", "SchedulerName", "PriorityClassName", "NodeSelector", "HostNetwork")

// cachedPodSpecIndexes are the indexes of cachedPodSpecFields in corev1.PodSpec.
var cachedPodSpecIndexes = func() [][]int {
	t := reflect.TypeFor[corev1.PodSpec]()
	var out [][]int
	for _, name := range sets.List(cachedPodSpecFields) {
		f, ok := t.FieldByName(name)
		if !ok {
			panic("corev1.PodSpec has no field " + name)
		}
		out = append(out, f.Index)
	}
	return out
}()

// CachedPod returns what the pod cache keeps of a pod: its metadata but managedFields (which
// templates have never seen), the spec fields of cachedPodSpecFields, its phase and its
// PodScheduled condition, from which the pod → entry latency starts. It shares pod's maps,
// slices and pointers: an informer's transform decodes a fresh pod for each event.
func CachedPod(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: pod.ObjectMeta}
	out.ManagedFields = nil
	src, dst := reflect.ValueOf(&pod.Spec).Elem(), reflect.ValueOf(&out.Spec).Elem()
	for _, i := range cachedPodSpecIndexes {
		dst.FieldByIndex(i).Set(src.FieldByIndex(i))
	}
	out.Status.Phase = pod.Status.Phase
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	return out
}

// readsOnlyCachedPodFields reports whether templates of this reach render the same from
// CachedPod as from the whole pod: all they read of the pod's spec is cached.
func (r Reach) readsOnlyCachedPodFields() bool {
	return !r.PodSpec.All && cachedPodSpecFields.IsSuperset(r.PodSpec.Fields)
}

// ReadsUncachedPodFields reports whether the ClusterSPIFFEID's templates can read fields of a
// pod the cache does not keep: its entries are rendered from the pod read whole.
func (c *ClusterSPIFFEID) ReadsUncachedPodFields() bool {
	return !c.reach.readsOnlyCachedPodFields()
}

// NeedsWholePod reports whether one of the ClusterSPIFFEIDs that select a pod of namespace ns
// reads fields of it the cache does not keep (see ReadsUncachedPodFields).
func NeedsWholePod(clusterSPIFFEIDs []*ClusterSPIFFEID, ns *corev1.Namespace, pod *corev1.Pod) bool {
	for _, c := range clusterSPIFFEIDs {
		if c.ReadsUncachedPodFields() && c.Selects(ns, pod) {
			return true
		}
	}
	return false
}
