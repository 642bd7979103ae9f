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
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The projections below keep of the objects the controllers cache what the controllers read
// besides templates, and what a Reach says templates can read. They share the maps, slices
// and pointers of the object they project, which the caller gives up: an informer's
// transform decodes a fresh object for each event.

// podMetaFields are the pod metadata the controller reads itself: keys and index values,
// ClusterSPIFFEID pod selectors, change detection, and the creation time the pod → entry
// latency metric starts from for pods created with a node.
var podMetaFields = sets.New("Name", "Namespace", "UID", "ResourceVersion", "CreationTimestamp", "Labels", "DeletionTimestamp")

// nodeMetaFields are the node metadata the controller reads itself.
var nodeMetaFields = sets.New("Name", "UID", "ResourceVersion")

// compactPodSpecFields are the spec fields a compact cached pod keeps besides the node name.
var compactPodSpecFields = sets.New("NodeName", "ServiceAccountName")

// CompactPodReach is what a compact cached pod (podcache.Pod) keeps of a pod for templates:
// the metadata the controller reads itself, labels included, and the node and service
// account names. It is what nearly every template reads.
func CompactPodReach() Reach {
	return Reach{PodMeta: FieldSet{Fields: podMetaFields.Clone()}, PodSpec: FieldSet{Fields: compactPodSpecFields.Clone()}}
}

// FullReach is every field templates can see but managedFields, which the cache has never
// kept: they are the bulk of most objects.
func FullReach() Reach {
	meta := FieldSet{Fields: sets.New[string]()}
	t := reflect.TypeFor[metav1.ObjectMeta]()
	for i := range t.NumField() {
		if name := t.Field(i).Name; name != "ManagedFields" {
			meta.Fields.Insert(name)
		}
	}
	return Reach{PodMeta: meta, PodSpec: FieldSet{All: true}, NodeMeta: meta, NodeSpec: FieldSet{All: true}}
}

// ProjectPod keeps of a pod the fields of reach, what the controller reads (see
// podMetaFields, the node name and the phase) and the PodScheduled condition.
func ProjectPod(pod *corev1.Pod, reach Reach) *corev1.Pod {
	out := &corev1.Pod{Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName}}
	copyFields(&out.ObjectMeta, &pod.ObjectMeta, podMetaFields, reach.PodMeta)
	copyFields(&out.Spec, &pod.Spec, nil, reach.PodSpec)
	out.Status.Phase = pod.Status.Phase
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out.Status.Conditions = []corev1.PodCondition{c}
			break
		}
	}
	return out
}

// ProjectNode keeps of a node the fields of reach and its name, UID and resource version.
func ProjectNode(node *corev1.Node, reach Reach) *corev1.Node {
	out := &corev1.Node{}
	copyFields(&out.ObjectMeta, &node.ObjectMeta, nodeMetaFields, reach.NodeMeta)
	copyFields(&out.Spec, &node.Spec, nil, reach.NodeSpec)
	return out
}

// ProjectNamespace keeps of a namespace what ClusterSPIFFEID namespace selectors read:
// templates do not see namespaces.
func ProjectNamespace(ns *corev1.Namespace) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels,
		DeletionTimestamp: ns.DeletionTimestamp,
	}}
}

// ProjectEndpointSlice keeps of a slice what ServicesOfPod, SlicePods and SliceListedPods
// read: its Service label and its endpoints' targets and conditions.
func ProjectEndpointSlice(slice *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
		Name: slice.Name, Namespace: slice.Namespace, UID: slice.UID, ResourceVersion: slice.ResourceVersion,
		DeletionTimestamp: slice.DeletionTimestamp,
	}}
	if svc, ok := slice.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	}
	if len(slice.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, len(slice.Endpoints))
		for i, ep := range slice.Endpoints {
			out.Endpoints[i] = discoveryv1.Endpoint{
				TargetRef:  ep.TargetRef,
				Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready, Terminating: ep.Conditions.Terminating},
			}
		}
	}
	return out
}

// copyFields copies into dst, a pointer to a struct, the fields of src named by always or by
// reached.
func copyFields[T any](dst, src *T, always sets.Set[string], reached FieldSet) {
	if reached.All {
		*dst = *src
		return
	}
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for name := range always.Union(reached.Fields) {
		d.FieldByName(name).Set(s.FieldByName(name))
	}
}
