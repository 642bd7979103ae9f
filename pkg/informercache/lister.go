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

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

const (
	// uidBucketIndex finds a pod by UID through the first uidBucketLen characters of its UID.
	// client-go keeps a set of keys per index value: one per pod took about 400 bytes a pod,
	// while 4096 buckets of random UIDs take a tenth of that at 30k pods, and a lookup scans
	// the few pods of one bucket.
	uidBucketIndex = "uidBucket"
	uidBucketLen   = 3

	// nodeNameIndex finds the pods on a node.
	nodeNameIndex = "spec.nodeName"
)

// PodLister reads the pods of a pod informer's cache by UID, namespace and node. The pods are
// the cache's and must not be modified. Its functions hand pods to a callback rather than
// return a slice: status counting walks every selected pod of every ClusterSPIFFEID each
// second during a bulk, and a slice per walk was most of what the controller allocated.
type PodLister struct {
	indexer cache.Indexer
}

// NewPodLister adds the indexes it reads by to the pod informer, which must not have started.
func NewPodLister(informer cache.SharedIndexInformer) (*PodLister, error) {
	if err := AddIndexers(informer, cache.Indexers{uidBucketIndex: indexByUIDBucket, nodeNameIndex: indexByNodeName}); err != nil {
		return nil, fmt.Errorf("adding pod indexes: %w", err)
	}
	return &PodLister{indexer: informer.GetIndexer()}, nil
}

// AddIndexers adds to an informer the indexes it does not have yet. Controllers sharing an
// informer, such as two instances of different classes in one binary, register the same
// index under the same name; the first registration serves them all, where AddIndexers of
// client-go would refuse the second.
func AddIndexers(informer cache.SharedIndexInformer, indexers cache.Indexers) error {
	missing := cache.Indexers{}
	have := informer.GetIndexer().GetIndexers()
	for name, f := range indexers {
		if _, ok := have[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return informer.AddIndexers(missing)
}

func uidBucket(uid types.UID) string {
	return string(uid[:min(len(uid), uidBucketLen)])
}

func indexByUIDBucket(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return []string{uidBucket(pod.UID)}, nil
}

func indexByNodeName(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// ByUID returns the pod with a UID, false when the cache has none.
func (l *PodLister) ByUID(uid types.UID) (*corev1.Pod, bool, error) {
	objs, err := l.indexer.ByIndex(uidBucketIndex, uidBucket(uid))
	if err != nil {
		return nil, false, fmt.Errorf("looking up pod %s: %w", uid, err)
	}
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok && pod.UID == uid {
			return pod, true, nil
		}
	}
	return nil, false, nil
}

// ByName returns the pod with a namespace and name, false when the cache has none.
func (l *PodLister) ByName(namespace, name string) (*corev1.Pod, bool) {
	obj, exists, err := l.indexer.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	pod, ok := obj.(*corev1.Pod)
	return pod, ok
}

// EachIn calls f with every pod of a namespace whose labels selector matches.
func (l *PodLister) EachIn(namespace string, selector labels.Selector, f func(*corev1.Pod)) error {
	objs, err := l.indexer.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return fmt.Errorf("listing pods of %s: %w", namespace, err)
	}
	each(objs, func(pod *corev1.Pod) {
		if selector.Matches(labels.Set(pod.Labels)) {
			f(pod)
		}
	})
	return nil
}

// EachOnNode calls f with every pod bound to a node.
func (l *PodLister) EachOnNode(node string, f func(*corev1.Pod)) error {
	objs, err := l.indexer.ByIndex(nodeNameIndex, node)
	if err != nil {
		return fmt.Errorf("listing pods of node %s: %w", node, err)
	}
	each(objs, f)
	return nil
}

// Each calls f with every cached pod.
func (l *PodLister) Each(f func(*corev1.Pod)) {
	each(l.indexer.List(), f)
}

func each(objs []any, f func(*corev1.Pod)) {
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			f(pod)
		}
	}
}

// endpointSlicePodIndex finds the EndpointSlices whose endpoints target a pod, by the pod's
// "namespace/name".
const endpointSlicePodIndex = "targetPod"

// EndpointSliceLister finds the EndpointSlices that target a pod, ready or not.
type EndpointSliceLister struct {
	indexer cache.Indexer
}

// NewEndpointSliceLister adds the index it reads by to the EndpointSlice informer, which must
// not have started.
func NewEndpointSliceLister(informer cache.SharedIndexInformer) (*EndpointSliceLister, error) {
	if err := AddIndexers(informer, cache.Indexers{endpointSlicePodIndex: indexEndpointSliceByPod}); err != nil {
		return nil, fmt.Errorf("adding EndpointSlice index: %w", err)
	}
	return &EndpointSliceLister{indexer: informer.GetIndexer()}, nil
}

func indexEndpointSliceByPod(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	return render.SlicePods(slice), nil
}

// ForPod returns the EndpointSlices that target the pod of a namespace and name.
func (l *EndpointSliceLister) ForPod(namespace, name string) ([]*discoveryv1.EndpointSlice, error) {
	objs, err := l.indexer.ByIndex(endpointSlicePodIndex, namespace+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of pod %s/%s: %w", namespace, name, err)
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, obj := range objs {
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
			out = append(out, slice)
		}
	}
	return out, nil
}
