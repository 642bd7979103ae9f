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

// Package entry is the controller that keeps SPIRE's registration entries equal to what
// ClusterSPIFFEIDs declare for the cluster's pods and ClusterStaticEntries declare literally.
//
// It is built as the endpointslice controller is: this package holds the informers, the event
// handlers that map events to keys, the queues, the syncs and the status writers, by kind
// (pod.go, clusterspiffeid.go, clusterstaticentry.go); pkg/render turns objects into declared
// entries; pkg/reconciler owns SPIRE (entry cache, plan, writes).
package entry

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	clientset "k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// ControllerName names the controller in logs, Events, metrics and leader election.
const ControllerName = "spire-registrar-entry-controller"

// podQueueName names the queue of pods in the workqueue and parking metrics.
const podQueueName = "spire_registrar_pods"

// Options are the settings the controller renders and writes entries with. The embedded
// reconciler options say which entries it owns: with SkipClusterSPIFFEIDs it reads no pod.
type Options struct {
	reconciler.Options
	render.Settings
	// IgnoreNamespace reports namespaces whose pods get no entries; nil ignores none.
	IgnoreNamespace func(namespace string) bool
	// Class selects the resources this controller handles.
	Class config.Class
	// ResyncInterval is how often SPIRE is listed in full to repair out-of-band changes.
	ResyncInterval time.Duration
	// MaxResyncShare bounds the share of time full resyncs take, stretching ResyncInterval
	// on a large server (see runner.Loop); 0 means runner.DefaultMaxResyncShare.
	MaxResyncShare float64
}

// Controller keeps SPIRE's entries equal to what ClusterSPIFFEIDs declare for pods and
// ClusterStaticEntries declare literally.
//
// Its unit of work is one pod, keyed by UID: every pod entry carries the pod's UID as a
// selector, so a pod's entries are its own. Events are mapped to the pods they affect; a worker
// renders a pod's declared entries from listers and diffs them against the entry cache, so an
// event costs no SPIRE read. A full resync at start and every ResyncInterval diffs everything
// against a fresh list; it is the only path that removes entries of pods the controller never
// saw, and the one that repairs changes made behind its back.
type Controller struct {
	opts       Options                // how entries are rendered, and which are owned
	renderer   *render.Renderer       // renders declared entries from the cached objects
	reconciler *reconciler.Reconciler // owns SPIRE: the entry cache, the diff and the writes
	events     *runner.Events         // records Events, or only logs them

	// podSide is everything about pods and ClusterSPIFFEIDs; nil when they are skipped.
	*podSide
	cachesSynced []cache.InformerSynced // the informers Run waits for

	clusterStaticEntries *clusterStaticEntries // lister, queue, parking and status

	synced   atomic.Bool     // set once the first full resync succeeded; nothing is written before
	handlers runner.Handlers // the event handlers added to the informers, removed when Run returns
}

// podSide is the part of the controller that exists only when it reconciles ClusterSPIFFEIDs:
// the listers pod entries are rendered from, the pod queue, and the ClusterSPIFFEIDs. Without
// it the controller reads no pod: asking for their informers would cache every pod of the
// cluster for no use.
type podSide struct {
	pods            *informercache.PodLister           // pods as the cache keeps them (render.CachedPod)
	wholePods       *informercache.WholePods           // pods read whole, for templates that read more
	namespaceLister corelisters.NamespaceLister        // namespaces, for selectors and templates
	nodeLister      corelisters.NodeLister             // nodes, for templates and parent IDs
	slices          *informercache.EndpointSliceLister // EndpointSlices by the pods they target

	podQueue   workqueue.TypedRateLimitingInterface[types.UID] // pod UIDs to sync
	podParking *runner.Parking[types.UID]                      // pods waiting for SPIRE to answer
	podLatency *metrics.PodEntryLatencyTracker                 // each pod's time to its entries

	clusterSPIFFEIDs *clusterSPIFFEIDs // lister, compiled cache, fan-out and status
}

// NewController wires the controller to the given informers. It registers indexes and event
// handlers but starts nothing: the caller starts the informer factories, then calls Run.
//
// When opts.SkipClusterSPIFFEIDs is set, only clusterStaticEntryInformer is used, the others
// may be nil, and the controller has no pod side. kubeClient, which receives Events, and
// spireAPI, which writes the status of our resources, may be nil: Events are then only logged
// and status is left alone (static mode, where the resources are files). opts.DryRun has the
// same effect with both set. podClient reads pods whole for the ClusterSPIFFEIDs whose templates
// read fields the pod cache does not keep (see informercache.WholePods); without it their pods
// fail to sync.
func NewController(
	ctx context.Context,
	podInformer coreinformers.PodInformer,
	namespaceInformer coreinformers.NamespaceInformer,
	nodeInformer coreinformers.NodeInformer,
	sliceInformer discoveryinformers.EndpointSliceInformer,
	clusterSPIFFEIDInformer spireinformers.ClusterSPIFFEIDInformer,
	clusterStaticEntryInformer spireinformers.ClusterStaticEntryInformer,
	kubeClient clientset.Interface,
	podClient corev1client.PodsGetter,
	spireAPI spireclientset.Interface,
	spireClient spire.EntryClient,
	opts Options,
) (*Controller, error) {
	if opts.IgnoreNamespace == nil {
		opts.IgnoreNamespace = func(string) bool { return false }
	}
	if opts.ResyncInterval <= 0 {
		return nil, fmt.Errorf("resync interval must be positive, got %v", opts.ResyncInterval)
	}
	r, err := render.NewRenderer(opts.Settings)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		opts:       opts,
		renderer:   r,
		reconciler: reconciler.NewReconciler(spireClient, opts.Options),
		events:     runner.NewEvents(ctx, ControllerName, kubeClient, opts.DryRun),
	}
	clusterSPIFFEIDStatus, clusterStaticEntryStatus := statusWriters(spireAPI, opts.DryRun)
	c.clusterStaticEntries = newClusterStaticEntries(clusterStaticEntryInformer.Lister(), clusterStaticEntryStatus, c.reconciler.Probe)
	c.cachesSynced = []cache.InformerSynced{clusterStaticEntryInformer.Informer().HasSynced}
	if err := c.addClusterStaticEntryEventHandlers(clusterStaticEntryInformer); err != nil {
		return nil, err
	}
	if opts.SkipClusterSPIFFEIDs {
		return c, nil
	}
	if podInformer == nil || namespaceInformer == nil || nodeInformer == nil || sliceInformer == nil || clusterSPIFFEIDInformer == nil {
		return nil, fmt.Errorf("the informers of pods, namespaces, nodes, EndpointSlices and ClusterSPIFFEIDs are required unless ClusterSPIFFEIDs are skipped")
	}
	podQueue := runner.NewQueue[types.UID](podQueueName, 50, 500)
	p := &podSide{
		wholePods:        informercache.NewWholePods(podClient),
		namespaceLister:  namespaceInformer.Lister(),
		nodeLister:       nodeInformer.Lister(),
		podQueue:         podQueue,
		podParking:       runner.NewParking(podQueueName, podQueue, c.reconciler.Probe),
		podLatency:       metrics.NewPodEntryLatencyTracker(),
		clusterSPIFFEIDs: newClusterSPIFFEIDs(clusterSPIFFEIDInformer.Lister(), clusterSPIFFEIDStatus),
	}
	if p.pods, err = informercache.NewPodLister(podInformer.Informer()); err != nil {
		return nil, err
	}
	if p.slices, err = informercache.NewEndpointSliceLister(sliceInformer.Informer()); err != nil {
		return nil, err
	}
	c.podSide = p
	c.cachesSynced = append(c.cachesSynced,
		sliceInformer.Informer().HasSynced,
		podInformer.Informer().HasSynced,
		namespaceInformer.Informer().HasSynced,
		nodeInformer.Informer().HasSynced,
		clusterSPIFFEIDInformer.Informer().HasSynced,
	)
	if err := c.addPodEventHandlers(klog.FromContext(ctx), podInformer, namespaceInformer, nodeInformer, sliceInformer, clusterSPIFFEIDInformer); err != nil {
		return nil, err
	}
	return c, nil
}

// HasSynced reports whether the controller has completed its first full resync; until then it
// has written nothing. It is what a readiness probe should report.
func (c *Controller) HasSynced() bool {
	return c.synced.Load()
}

// Waiting is how many keys (pods and ClusterStaticEntries) wait for SPIRE to answer.
func (c *Controller) Waiting() int {
	n := c.clusterStaticEntries.parking.Len()
	if c.podSide != nil {
		n += c.podParking.Len()
	}
	return n
}

// Run waits for the informers, runs the first full resync (retrying until SPIRE answers),
// then runs workers until ctx is done. It returns once every goroutine it started has ended.
func (c *Controller) Run(ctx context.Context, podWorkers int) {
	statics := c.clusterStaticEntries
	var workers []runner.Workers
	var queues []runner.ShutDowner
	if p := c.podSide; p != nil {
		workers = append(workers,
			runner.Workers{Count: podWorkers, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "pod", p.podQueue, p.podParking, c.syncPod)
			}},
			runner.Workers{Count: 1, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "clusterSPIFFEID", p.clusterSPIFFEIDs.fanOut, nil, c.syncClusterSPIFFEID)
			}},
			runner.Workers{Count: 1, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "clusterSPIFFEIDStatus", p.clusterSPIFFEIDs.status.queue, nil, c.syncClusterSPIFFEIDStatus)
			}},
			runner.Workers{Count: 1, Work: p.podParking.Run},
		)
		queues = append(queues, p.podQueue, p.clusterSPIFFEIDs.fanOut, p.clusterSPIFFEIDs.status.queue)
	}
	workers = append(workers,
		// One worker: syncClusterStaticEntry relies on it.
		runner.Workers{Count: 1, Work: func(ctx context.Context) {
			runner.Work(ctx, ControllerName, "clusterStaticEntry", statics.queue, statics.parking, c.syncClusterStaticEntry)
		}},
		runner.Workers{Count: 1, Work: statics.parking.Run},
	)
	queues = append(queues, statics.queue)
	runner.Run(ctx, runner.Loop{
		Name:           ControllerName,
		Events:         c.events,
		CachesSynced:   c.cachesSynced,
		Prefetch:       c.reconciler.Prefetch,
		Resync:         c.fullResync,
		ResyncInterval: c.opts.ResyncInterval,
		MaxResyncShare: c.opts.MaxResyncShare,
		WatchSPIRE:     c.reconciler.WatchSPIRE,
		OnSynced:       func() { c.synced.Store(true) },
		Workers:        workers,
		Queues:         queues,
		Handlers:       &c.handlers,
	})
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
		{clusterSPIFFEIDInformer.Informer(), c.clusterSPIFFEIDs.eventHandler()},
	}
	for _, h := range handlers {
		if err := c.handlers.Add(h.informer, h.handler); err != nil {
			return err
		}
	}
	return nil
}

// unlessInitial adapts an add handler to skip the objects of the informer's initial list.
func unlessInitial(add func(obj any)) func(obj any, isInInitialList bool) {
	return func(obj any, isInInitialList bool) {
		if !isInInitialList {
			add(obj)
		}
	}
}

func (c *Controller) enqueuePod(obj any) {
	if pod, ok := runner.Unwrap[*corev1.Pod](obj); ok {
		c.podQueue.Add(pod.UID)
	}
}

func (c *Controller) enqueueCachedPod(pod *corev1.Pod) {
	c.podQueue.Add(pod.UID)
}

// enqueuePodUIDs enqueues pods by UID.
func (c *Controller) enqueuePodUIDs(uids []types.UID) {
	for _, uid := range uids {
		c.podQueue.Add(uid)
	}
}

// onPodUpdate enqueues a pod only when something an entry depends on changed: templates see
// the pod's metadata and spec, and the phase decides whether it gets an entry. Most pod
// updates at scale are status updates, which this skips. A relist may pair versions of two
// pods of one name: both are enqueued then.
func (c *Controller) onPodUpdate(oldObj, newObj any) {
	oldPod, okOld := oldObj.(*corev1.Pod)
	newPod, okNew := newObj.(*corev1.Pod)
	if !okOld || !okNew || oldPod.ResourceVersion == newPod.ResourceVersion {
		return
	}
	if !informercache.SameForEntries(oldPod, newPod) {
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
	if err := c.pods.EachIn(ns.Name, labels.Everything(), c.enqueueCachedPod); err != nil {
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
	if err := c.pods.EachOnNode(node.Name, c.enqueueCachedPod); err != nil {
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

// enqueueSlicePods resyncs the pods a slice targets: their service DNS names may change.
func (c *Controller) enqueueSlicePods(obj any) {
	slice, ok := runner.Unwrap[*discoveryv1.EndpointSlice](obj)
	if !ok {
		return
	}
	for _, key := range render.SlicePods(slice) {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		if pod, ok := c.pods.ByName(ns, name); ok {
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

// statusWriters returns the writers of ClusterSPIFFEID and ClusterStaticEntry status. Without
// a client, or in a dry run, they write nothing.
func statusWriters(client spireclientset.Interface, dryRun bool) (*runner.StatusWriter[*spirev1alpha1.ClusterSPIFFEID], *runner.StatusWriter[*spirev1alpha1.ClusterStaticEntry]) {
	var updateClusterSPIFFEID func(context.Context, *spirev1alpha1.ClusterSPIFFEID, metav1.UpdateOptions) (*spirev1alpha1.ClusterSPIFFEID, error)
	var updateClusterStaticEntry func(context.Context, *spirev1alpha1.ClusterStaticEntry, metav1.UpdateOptions) (*spirev1alpha1.ClusterStaticEntry, error)
	if client != nil {
		updateClusterSPIFFEID = client.SpireV1alpha1().ClusterSPIFFEIDs().UpdateStatus
		updateClusterStaticEntry = client.SpireV1alpha1().ClusterStaticEntries().UpdateStatus
	}
	return runner.NewStatusWriter("ClusterSPIFFEID", updateClusterSPIFFEID, dryRun,
			func(o *spirev1alpha1.ClusterSPIFFEID) *[]metav1.Condition { return &o.Status.Conditions }),
		runner.NewStatusWriter("ClusterStaticEntry", updateClusterStaticEntry, dryRun,
			func(o *spirev1alpha1.ClusterStaticEntry) *[]metav1.Condition { return &o.Status.Conditions })
}
