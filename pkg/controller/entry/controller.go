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
// handlers that map events to keys, the queues, the syncs and the status writers; pkg/render
// turns objects into declared entries; pkg/reconciler owns SPIRE (entry cache, plan, writes).
package entry

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirelisters "github.com/spire-registrar/spire-registrar/generated/listers/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

const (
	// ControllerName names the controller in logs, Events, metrics and leader election.
	ControllerName = "spire-registrar-entry-controller"

	// statusDelay batches status writes: a ClusterSPIFFEID that selects thousands of pods gets
	// one status update for a burst of pod syncs, not one per pod.
	statusDelay = time.Second
)

// Options are the settings the controller renders entries with.
type Options struct {
	// TrustDomain every rendered SPIFFE ID and parent ID must belong to.
	TrustDomain spiffeid.TrustDomain
	// ClusterName and ClusterDomain are offered to templates.
	ClusterName   string
	ClusterDomain string
	// ParentIDTemplate renders each pod entry's parent ID.
	ParentIDTemplate string
	// IgnoreNamespace reports namespaces whose pods get no entries.
	IgnoreNamespace func(namespace string) bool
	// ClassMatches reports whether a resource's className is this controller's to handle.
	ClassMatches func(className string) bool
	// ResyncInterval is how often SPIRE is listed in full to repair out-of-band changes.
	ResyncInterval time.Duration
	// MaxResyncShare bounds the share of time full resyncs take, stretching ResyncInterval
	// on a large server (see runner.Loop); 0 means runner.DefaultMaxResyncShare.
	MaxResyncShare float64
	// EntryIDPrefix, when set, names the entries this controller owns: "<prefix>.<unique>".
	// Other entries are invisible to it.
	EntryIDPrefix string
	// EntryIDPrefixCleanup, when set, names entries to delete at each full resync: those of
	// that prefix, or for "" those whose ID has no dot.
	EntryIDPrefixCleanup *string
	// IgnoreClusterSPIFFEIDs and IgnoreClusterStaticEntries turn a kind off: its resources
	// declare nothing, and the entries it would own (pod entries, and entries of no pod) are
	// left alone rather than deleted.
	IgnoreClusterSPIFFEIDs     bool
	IgnoreClusterStaticEntries bool
	// KeepSPIFFEIDs are SPIFFE IDs whose entries are never deleted: spire-registrar's own,
	// when it reaches SPIRE over mTLS with an SVID an operator-made admin entry issues.
	KeepSPIFFEIDs []string
	// DryRun writes nothing anywhere: every planned change is logged at the default level, no
	// status is written, and Events are only logged. The SPIRE client given to the controller
	// is expected to be spire.DryRun, which writes nothing to SPIRE.
	DryRun bool
	// CheckPodProjection, when set, returns an error for a cached pod that lacks fields the
	// ClusterSPIFFEIDs' templates can read, the pod informer keeping projections of pods: the
	// sync fails and is retried, so that no entry is ever rendered from a partial pod.
	CheckPodProjection PodProjectionCheck
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
	opts       Options
	renderer   *render.Renderer
	reconciler *reconciler.Reconciler
	// spireAPI writes the status of our resources; nil when there is no API (static mode).
	spireAPI spireclientset.Interface
	events   *runner.Events

	// podIndexer is the pod informer's cache, read through podcache.View (see pods.go).
	podIndexer               cache.Indexer
	namespaceLister          corelisters.NamespaceLister
	nodeLister               corelisters.NodeLister
	clusterSPIFFEIDLister    spirelisters.ClusterSPIFFEIDLister
	clusterStaticEntryLister spirelisters.ClusterStaticEntryLister
	sliceIndexer             cache.Indexer
	cachesSynced             []cache.InformerSynced

	// podQueue holds pod UIDs to sync; clusterSPIFFEIDQueue holds ClusterSPIFFEID names whose
	// change must fan out to pods; statusQueue holds ClusterSPIFFEID names whose status may be
	// out of date; clusterStaticEntryQueue holds ClusterStaticEntry names to sync.
	podQueue             workqueue.TypedRateLimitingInterface[types.UID]
	clusterSPIFFEIDQueue workqueue.TypedRateLimitingInterface[string]
	statusQueue          workqueue.TypedRateLimitingInterface[string]
	// statusPacer spaces the status syncs that pod syncs cause by what they cost.
	statusPacer             *statusPacer
	clusterStaticEntryQueue workqueue.TypedRateLimitingInterface[string]

	// podParking and clusterStaticEntryParking hold the keys whose sync failed only because
	// SPIRE was unreachable, until it answers again.
	podParking                *runner.Parking[types.UID]
	clusterStaticEntryParking *runner.Parking[string]

	clusterSPIFFEIDs *clusterSPIFFEIDCache
	// podLatency observes each pod's time to its entries.
	podLatency *metrics.PodEntryLatencyTracker

	// synced is set once the first full resync succeeded; nothing is written before.
	synced atomic.Bool

	// clusterSPIFFEIDConditions and clusterStaticEntryConditions learn whether the installed
	// CRDs keep status conditions (spire-controller-manager's own CRDs prune them).
	clusterSPIFFEIDConditions, clusterStaticEntryConditions runner.ConditionSupport
}

// NewController wires the controller to the given informers. It registers indexes and event
// handlers but starts nothing: the caller starts the informer factories, then calls Run.
//
// When opts.IgnoreClusterSPIFFEIDs is set, only clusterStaticEntryInformer is used and the
// others may be nil. kubeClient, which receives Events, and spireAPI, which writes the status
// of our resources, may be nil: Events are then only logged and status is left alone (static
// mode, where the resources are files). opts.DryRun has the same effect with both set.
func NewController(
	ctx context.Context,
	podInformer coreinformers.PodInformer,
	namespaceInformer coreinformers.NamespaceInformer,
	nodeInformer coreinformers.NodeInformer,
	sliceInformer discoveryinformers.EndpointSliceInformer,
	clusterSPIFFEIDInformer spireinformers.ClusterSPIFFEIDInformer,
	clusterStaticEntryInformer spireinformers.ClusterStaticEntryInformer,
	kubeClient clientset.Interface,
	spireAPI spireclientset.Interface,
	spireClient spire.EntryClient,
	opts Options,
) (*Controller, error) {
	logger := klog.FromContext(ctx)
	if opts.IgnoreNamespace == nil {
		opts.IgnoreNamespace = func(string) bool { return false }
	}
	if opts.ClassMatches == nil {
		opts.ClassMatches = func(string) bool { return true }
	}
	if opts.ResyncInterval <= 0 {
		return nil, fmt.Errorf("resync interval must be positive, got %v", opts.ResyncInterval)
	}
	r, err := render.NewRenderer(opts.TrustDomain, opts.ClusterName, opts.ClusterDomain, opts.ParentIDTemplate)
	if err != nil {
		return nil, err
	}

	c := &Controller{
		opts:     opts,
		renderer: r,
		reconciler: reconciler.NewReconciler(spireClient, reconciler.Options{
			EntryIDPrefix:        opts.EntryIDPrefix,
			EntryIDPrefixCleanup: opts.EntryIDPrefixCleanup,
			SkipPodEntries:       opts.IgnoreClusterSPIFFEIDs,
			SkipOtherEntries:     opts.IgnoreClusterStaticEntries,
			DryRun:               opts.DryRun,
			KeepSPIFFEIDs:        opts.KeepSPIFFEIDs,
		}),
		spireAPI: spireAPI,
		events:   runner.NewEvents(ctx, ControllerName, kubeClient, opts.DryRun),

		clusterStaticEntryLister: clusterStaticEntryInformer.Lister(),
		cachesSynced:             []cache.InformerSynced{clusterStaticEntryInformer.Informer().HasSynced},

		podQueue:                runner.NewQueue[types.UID]("spire_registrar_pods", 50, 500),
		clusterSPIFFEIDQueue:    runner.NewQueue[string]("spire_registrar_clusterspiffeids", 50, 500),
		statusQueue:             runner.NewQueue[string]("spire_registrar_clusterspiffeid_status", 50, 500),
		clusterStaticEntryQueue: runner.NewQueue[string]("spire_registrar_clusterstaticentries", 50, 500),

		clusterSPIFFEIDs: newClusterSPIFFEIDCache(),
		statusPacer:      newStatusPacer(),
		podLatency:       metrics.NewPodEntryLatencyTracker(),
	}
	c.podParking = runner.NewParking(c.podQueue, c.reconciler.Probe)
	c.clusterStaticEntryParking = runner.NewParking(c.clusterStaticEntryQueue, c.reconciler.Probe)
	if err := c.addClusterStaticEntryEventHandlers(clusterStaticEntryInformer); err != nil {
		return nil, err
	}
	if opts.IgnoreClusterSPIFFEIDs {
		// Nothing reads pods then: asking for their informers would cache every pod of the
		// cluster for no use.
		return c, nil
	}
	if podInformer == nil || namespaceInformer == nil || nodeInformer == nil || sliceInformer == nil || clusterSPIFFEIDInformer == nil {
		return nil, fmt.Errorf("the informers of pods, namespaces, nodes, EndpointSlices and ClusterSPIFFEIDs are required unless ClusterSPIFFEIDs are ignored")
	}
	c.podIndexer = podInformer.Informer().GetIndexer()
	c.namespaceLister = namespaceInformer.Lister()
	c.nodeLister = nodeInformer.Lister()
	c.clusterSPIFFEIDLister = clusterSPIFFEIDInformer.Lister()
	c.sliceIndexer = sliceInformer.Informer().GetIndexer()
	c.cachesSynced = append(c.cachesSynced,
		sliceInformer.Informer().HasSynced,
		podInformer.Informer().HasSynced,
		namespaceInformer.Informer().HasSynced,
		nodeInformer.Informer().HasSynced,
		clusterSPIFFEIDInformer.Informer().HasSynced,
	)

	if err := runner.AddIndexers(podInformer.Informer(), PodIndexers()); err != nil {
		return nil, fmt.Errorf("adding pod indexes: %w", err)
	}
	if err := runner.AddIndexers(sliceInformer.Informer(), cache.Indexers{endpointSlicePodIndex: indexEndpointSliceByPod}); err != nil {
		return nil, fmt.Errorf("adding EndpointSlice index: %w", err)
	}
	if err := c.addPodEventHandlers(logger, podInformer, namespaceInformer, nodeInformer, sliceInformer, clusterSPIFFEIDInformer); err != nil {
		return nil, err
	}
	return c, nil
}

// HasSynced reports whether the controller has completed its first full resync; until then it
// has written nothing. It is what a readiness probe should report.
func (c *Controller) HasSynced() bool {
	return c.synced.Load()
}

// Run waits for the informers, runs the first full resync (retrying until SPIRE answers),
// then runs workers until ctx is done. It returns once every goroutine it started has ended.
func (c *Controller) Run(ctx context.Context, workers int) {
	runner.Run(ctx, runner.Loop{
		Name:           ControllerName,
		Events:         c.events,
		CachesSynced:   c.cachesSynced,
		Prefetch:       c.reconciler.Prefetch,
		Resync:         c.fullResync,
		ResyncInterval: c.opts.ResyncInterval,
		MaxResyncShare: c.opts.MaxResyncShare,
		OnSynced:       func() { c.synced.Store(true) },
		Workers: []runner.Workers{
			{Count: workers, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "pod", c.podQueue, c.podParking, c.syncPod)
			}},
			{Count: 1, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "clusterSPIFFEID", c.clusterSPIFFEIDQueue, nil, c.syncClusterSPIFFEID)
			}},
			{Count: 1, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "clusterSPIFFEIDStatus", c.statusQueue, nil, c.syncClusterSPIFFEIDStatus)
			}},
			// One worker: syncClusterStaticEntry relies on it.
			{Count: 1, Work: func(ctx context.Context) {
				runner.Work(ctx, ControllerName, "clusterStaticEntry", c.clusterStaticEntryQueue, c.clusterStaticEntryParking, c.syncClusterStaticEntry)
			}},
			{Count: 1, Work: c.podParking.Run},
			{Count: 1, Work: c.clusterStaticEntryParking.Run},
		},
		Queues: []runner.ShutDowner{c.podQueue, c.clusterSPIFFEIDQueue, c.statusQueue, c.clusterStaticEntryQueue},
	})
}
