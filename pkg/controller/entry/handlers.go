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
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/podcache"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// addClusterStaticEntryEventHandlers maps ClusterStaticEntry events to their names.
func (c *Controller) addClusterStaticEntryEventHandlers(clusterStaticEntryInformer spireinformers.ClusterStaticEntryInformer) error {
	_, err := clusterStaticEntryInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueClusterStaticEntry(obj) },
		UpdateFunc: c.onClusterStaticEntryUpdate,
		DeleteFunc: func(obj any) {
			c.enqueueClusterStaticEntry(obj)
			c.enqueueClusterStaticEntryTwins(obj)
		},
	})
	if err != nil {
		return fmt.Errorf("adding event handler: %w", err)
	}
	return nil
}

// addPodEventHandlers maps every event that can change a pod's entries to the pods it
// affects. Handlers run on the informers' goroutines, so they only compute keys and enqueue; a
// ClusterSPIFFEID's fan-out to its pods runs in its own worker.
func (c *Controller) addPodEventHandlers(
	logger klog.Logger,
	podInformer coreinformers.PodInformer,
	namespaceInformer coreinformers.NamespaceInformer,
	nodeInformer coreinformers.NodeInformer,
	sliceInformer discoveryinformers.EndpointSliceInformer,
	clusterSPIFFEIDInformer spireinformers.ClusterSPIFFEIDInformer,
) error {
	// Objects of an informer's initial list enqueue no pod: the initial full resync, which runs
	// once every informer has synced and before any worker starts, declares every pod from the
	// listers. Syncing them again would only find them in sync, at 30k pods a backlog of tens
	// of seconds in front of the first new pod.
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{podInformer.Informer(), cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    unlessInitial(c.enqueuePod),
			UpdateFunc: c.onPodUpdate,
			DeleteFunc: func(obj any) { c.enqueuePod(obj) },
		}},
		{namespaceInformer.Informer(), cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    unlessInitial(func(obj any) { c.enqueuePodsIn(logger, obj) }),
			UpdateFunc: c.onNamespaceUpdate(logger),
			DeleteFunc: func(obj any) { c.enqueuePodsIn(logger, obj) },
		}},
		{nodeInformer.Informer(), cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    unlessInitial(func(obj any) { c.enqueuePodsOn(logger, obj) }),
			UpdateFunc: c.onNodeUpdate(logger),
			DeleteFunc: func(obj any) { c.enqueuePodsOn(logger, obj) },
		}},
		{sliceInformer.Informer(), cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    unlessInitial(c.enqueueSlicePods),
			UpdateFunc: c.onSliceUpdate,
			DeleteFunc: func(obj any) { c.enqueueSlicePods(obj) },
		}},
		{clusterSPIFFEIDInformer.Informer(), cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, isInInitialList bool) {
				if isInInitialList {
					// Its pods are declared by the initial resync; its status still needs a write.
					c.enqueueClusterSPIFFEIDStatus(obj)
					return
				}
				c.enqueueClusterSPIFFEID(obj)
			},
			UpdateFunc: c.onClusterSPIFFEIDUpdate,
			DeleteFunc: func(obj any) { c.enqueueClusterSPIFFEID(obj) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return fmt.Errorf("adding event handler: %w", err)
		}
	}
	return nil
}

// endpointSlicePodIndex finds the EndpointSlices whose endpoints target a pod, by the pod's
// "namespace/name".
const endpointSlicePodIndex = "targetPod"

// indexEndpointSliceByPod indexes a slice under every pod its endpoints target, ready or not.
func indexEndpointSliceByPod(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	return render.SlicePods(slice), nil
}

func (c *Controller) enqueuePod(obj any) {
	if pod, ok := podcache.ViewOf(obj); ok {
		c.podQueue.Add(pod.UID)
	}
}

// onPodUpdate enqueues a pod only when something an entry depends on changed: templates see
// the pod's metadata and spec, and the phase decides whether it gets an entry. Most pod
// updates at scale are status updates, which this skips. A relist may pair versions of two
// pods of one name: both are enqueued then.
func (c *Controller) onPodUpdate(oldObj, newObj any) {
	oldPod, okOld := podcache.ViewOf(oldObj)
	newPod, okNew := podcache.ViewOf(newObj)
	if !okOld || !okNew || oldPod.ResourceVersion == newPod.ResourceVersion {
		return
	}
	if !podcache.SameForEntries(oldObj, newObj) {
		if oldPod.UID != newPod.UID {
			c.podQueue.Add(oldPod.UID)
		}
		c.podQueue.Add(newPod.UID)
	}
}

func (c *Controller) enqueuePodsIn(logger klog.Logger, obj any) {
	ns, ok := runner.Unwrap[*corev1.Namespace](obj)
	if !ok {
		return
	}
	if err := c.eachPodByIndex(cache.NamespaceIndex, ns.Name, c.enqueuePodView); err != nil {
		logger.Error(err, "Listing pods of namespace", "namespace", klog.KObj(ns))
	}
}

// onNamespaceUpdate resyncs a namespace's pods when its labels change; templates see nothing
// else of it.
func (c *Controller) onNamespaceUpdate(logger klog.Logger) func(oldObj, newObj any) {
	return func(oldObj, newObj any) {
		oldNS, newNS := oldObj.(*corev1.Namespace), newObj.(*corev1.Namespace)
		if !maps.Equal(oldNS.Labels, newNS.Labels) {
			c.enqueuePodsIn(logger, newNS)
		}
	}
}

func (c *Controller) enqueuePodsOn(logger klog.Logger, obj any) {
	node, ok := runner.Unwrap[*corev1.Node](obj)
	if !ok {
		return
	}
	if err := c.eachPodByIndex(nodeNameIndex, node.Name, c.enqueuePodView); err != nil {
		logger.Error(err, "Listing pods of node", "node", klog.KObj(node))
	}
}

// onNodeUpdate resyncs a node's pods when what templates see of it changes. Nodes update
// their status every few seconds; that is skipped.
func (c *Controller) onNodeUpdate(logger klog.Logger) func(oldObj, newObj any) {
	return func(oldObj, newObj any) {
		oldNode, newNode := oldObj.(*corev1.Node), newObj.(*corev1.Node)
		if oldNode.UID != newNode.UID ||
			!maps.Equal(oldNode.Labels, newNode.Labels) ||
			!maps.Equal(oldNode.Annotations, newNode.Annotations) ||
			!apiequality.Semantic.DeepEqual(oldNode.Spec, newNode.Spec) {
			c.enqueuePodsOn(logger, newNode)
		}
	}
}

func (c *Controller) enqueuePodView(pod podcache.View) {
	c.podQueue.Add(pod.UID)
}

func (c *Controller) enqueueClusterSPIFFEID(obj any) {
	if clusterSPIFFEID, ok := runner.Unwrap[*spirev1alpha1.ClusterSPIFFEID](obj); ok {
		c.clusterSPIFFEIDQueue.Add(clusterSPIFFEID.Name)
	}
	c.enqueueClusterSPIFFEIDStatus(obj)
}

func (c *Controller) enqueueClusterSPIFFEIDStatus(obj any) {
	if clusterSPIFFEID, ok := runner.Unwrap[*spirev1alpha1.ClusterSPIFFEID](obj); ok {
		c.statusQueue.AddAfter(clusterSPIFFEID.Name, statusDelay)
	}
}

// unlessInitial adapts an add handler to skip the objects of the informer's initial list.
func unlessInitial(add func(obj any)) func(obj any, isInInitialList bool) {
	return func(obj any, isInInitialList bool) {
		if !isInInitialList {
			add(obj)
		}
	}
}

// onClusterSPIFFEIDUpdate fans out spec changes and the start of a deletion only, which
// changes which declarer is preferred; the controller's own status writes come back as
// updates with the same generation.
func (c *Controller) onClusterSPIFFEIDUpdate(oldObj, newObj any) {
	oldClusterSPIFFEID, newClusterSPIFFEID := oldObj.(*spirev1alpha1.ClusterSPIFFEID), newObj.(*spirev1alpha1.ClusterSPIFFEID)
	if oldClusterSPIFFEID.Generation != newClusterSPIFFEID.Generation || oldClusterSPIFFEID.UID != newClusterSPIFFEID.UID ||
		!oldClusterSPIFFEID.DeletionTimestamp.Equal(newClusterSPIFFEID.DeletionTimestamp) {
		c.enqueueClusterSPIFFEID(newClusterSPIFFEID)
	}
}

// enqueuePodUIDs enqueues pods by UID.
func (c *Controller) enqueuePodUIDs(uids []types.UID) {
	for _, uid := range uids {
		c.podQueue.Add(uid)
	}
}

func (c *Controller) enqueueClusterStaticEntry(obj any) {
	if cse, ok := runner.Unwrap[*spirev1alpha1.ClusterStaticEntry](obj); ok {
		c.clusterStaticEntryQueue.Add(cse.Name)
	}
}

// onClusterStaticEntryUpdate skips the echoes of the controller's own status writes; the start
// of a deletion changes which declarer is preferred.
func (c *Controller) onClusterStaticEntryUpdate(oldObj, newObj any) {
	oldCSE, newCSE := oldObj.(*spirev1alpha1.ClusterStaticEntry), newObj.(*spirev1alpha1.ClusterStaticEntry)
	if oldCSE.Generation != newCSE.Generation || oldCSE.UID != newCSE.UID || !oldCSE.DeletionTimestamp.Equal(newCSE.DeletionTimestamp) {
		c.enqueueClusterStaticEntry(newCSE)
	}
	if oldCSE.Generation != newCSE.Generation || oldCSE.UID != newCSE.UID {
		c.enqueueClusterStaticEntryTwins(oldCSE)
	}
}

// enqueueClusterStaticEntryTwins queues the other ClusterStaticEntries of this class that
// declare the entry key obj declared: once obj declares another key, or none, one of them
// takes the entry over, and its status must say so. The key comes from the event's old
// object, not from memory of a sync, so a failed write cannot lose it. Static entries are
// few, and rendering one is cheap.
func (c *Controller) enqueueClusterStaticEntryTwins(obj any) {
	gone, ok := runner.Unwrap[*spirev1alpha1.ClusterStaticEntry](obj)
	if !ok || !c.opts.ClassMatches(gone.Spec.ClassName) {
		return
	}
	declared, err := c.renderer.StaticEntry(gone)
	if err != nil {
		return
	}
	all, err := c.clusterStaticEntryLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, other := range all {
		if other.Name == gone.Name || !c.opts.ClassMatches(other.Spec.ClassName) {
			continue
		}
		if d, err := c.renderer.StaticEntry(other); err == nil && d.Key == declared.Key {
			c.clusterStaticEntryQueue.Add(other.Name)
		}
	}
}

// enqueueSlicePods resyncs the pods a slice targets: their service DNS names may change.
func (c *Controller) enqueueSlicePods(obj any) {
	slice, ok := runner.Unwrap[*discoveryv1.EndpointSlice](obj)
	if !ok {
		return
	}
	for _, key := range render.SlicePods(slice) {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		if pod, ok := c.podByName(ns, name); ok {
			c.podQueue.Add(pod.UID)
		}
	}
}

// onSliceUpdate resyncs only when the pods a slice lists as v1 Endpoints would, or its
// Service, changed; most readiness flips change neither.
func (c *Controller) onSliceUpdate(oldObj, newObj any) {
	oldSlice, newSlice := oldObj.(*discoveryv1.EndpointSlice), newObj.(*discoveryv1.EndpointSlice)
	if render.ServiceOf(oldSlice) == render.ServiceOf(newSlice) && slices.Equal(render.SliceListedPods(oldSlice), render.SliceListedPods(newSlice)) {
		return
	}
	c.enqueueSlicePods(oldSlice)
	c.enqueueSlicePods(newSlice)
}
