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

package entry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/spire-registrar/spire-registrar/pkg/podcache"
)

// The pod informer's cache holds whole pods or, in the standalone binary, compact
// podcache.Pods: the controller reads it through podcache.View, never through a typed lister,
// and expands a pod only to render it.

const (
	// podUIDBucketIndex finds a pod by UID through the first uidBucketLen characters of its
	// UID. client-go keeps a set of keys per index value: one per pod took about 400 bytes a
	// pod, while 4096 buckets of random UIDs take a tenth of that at 30k pods, and a lookup
	// scans the few pods of one bucket.
	podUIDBucketIndex = "uidBucket"
	uidBucketLen      = 3

	// nodeNameIndex finds the pods on a node.
	nodeNameIndex = "spec.nodeName"
)

// PodIndexers are the indexes the controller adds to the pod informer.
func PodIndexers() cache.Indexers {
	return cache.Indexers{podUIDBucketIndex: indexPodByUIDBucket, nodeNameIndex: indexPodByNodeName}
}

func uidBucket(uid types.UID) string {
	return string(uid[:min(len(uid), uidBucketLen)])
}

func indexPodByUIDBucket(obj any) ([]string, error) {
	pod, ok := podcache.ViewOf(obj)
	if !ok {
		return nil, nil
	}
	return []string{uidBucket(pod.UID)}, nil
}

func indexPodByNodeName(obj any) ([]string, error) {
	pod, ok := podcache.ViewOf(obj)
	if !ok || pod.NodeName == "" {
		return nil, nil
	}
	return []string{pod.NodeName}, nil
}

// podByUID returns the pod with a UID, false when the informer has none.
func (c *Controller) podByUID(uid types.UID) (podcache.View, bool, error) {
	objs, err := c.podIndexer.ByIndex(podUIDBucketIndex, uidBucket(uid))
	if err != nil {
		return podcache.View{}, false, fmt.Errorf("looking up pod %s: %w", uid, err)
	}
	for _, obj := range objs {
		if pod, ok := podcache.ViewOf(obj); ok && pod.UID == uid {
			return pod, true, nil
		}
	}
	return podcache.View{}, false, nil
}

// The functions below hand pods to a callback rather than return a slice of views: status
// counting walks every selected pod of every ClusterSPIFFEID each second during a bulk, and a
// slice of 56-byte views per walk was most of what the controller allocated.

// eachPodIn calls f with every pod of a namespace whose labels selector matches.
func (c *Controller) eachPodIn(namespace string, selector labels.Selector, f func(podcache.View)) error {
	objs, err := c.podIndexer.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return fmt.Errorf("listing pods of %s: %w", namespace, err)
	}
	eachPod(objs, func(pod podcache.View) {
		if selector.Matches(labels.Set(pod.Labels)) {
			f(pod)
		}
	})
	return nil
}

// eachPodByIndex calls f with every pod an index holds under a value.
func (c *Controller) eachPodByIndex(index, value string, f func(podcache.View)) error {
	objs, err := c.podIndexer.ByIndex(index, value)
	if err != nil {
		return err
	}
	eachPod(objs, f)
	return nil
}

// eachPod calls f with the view of every pod among objs.
func eachPod(objs []any, f func(podcache.View)) {
	for _, obj := range objs {
		if pod, ok := podcache.ViewOf(obj); ok {
			f(pod)
		}
	}
}

// podByName returns the pod with a namespace and name, false when the informer has none.
func (c *Controller) podByName(namespace, name string) (podcache.View, bool) {
	obj, exists, err := c.podIndexer.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return podcache.View{}, false
	}
	return podcache.ViewOf(obj)
}
