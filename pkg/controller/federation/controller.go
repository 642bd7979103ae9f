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

// Package federation is the controller that keeps SPIRE's federation relationships equal to
// what ClusterFederatedTrustDomains declare.
package federation

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirelisters "github.com/spire-registrar/spire-registrar/generated/listers/spire/v1alpha1"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

const (
	// ControllerName names the controller in logs, Events, metrics and leader election.
	ControllerName = "spire-registrar-federation-controller"

	// trustDomainIndex finds the ClusterFederatedTrustDomains that name a trust domain.
	trustDomainIndex = "spec.trustDomain"

	// queueName names the queue of trust domains in the workqueue and parking metrics.
	queueName = "spire_registrar_federation_relationships"
)

// Options are the settings the controller declares relationships with: the reconciler's,
// whose DryRun also keeps the controller from writing status and sending Events (they are
// only logged), and the controller's own.
type Options struct {
	fedreconciler.Options
	// ResyncInterval is how often SPIRE is listed in full to repair out-of-band changes.
	ResyncInterval time.Duration
	// MaxResyncShare bounds the share of time full resyncs take, stretching ResyncInterval
	// (see runner.Loop); 0 means runner.DefaultMaxResyncShare.
	MaxResyncShare float64
}

// Controller keeps SPIRE's federation relationships equal to what ClusterFederatedTrustDomains
// declare.
//
// Its unit of work is one trust domain name. A worker reads the resources that name it from
// the informer's index and hands them to the reconciler, which diffs them against its cache of
// SPIRE's relationships, so an event costs no SPIRE read. A full resync at start and every
// ResyncInterval diffs everything against a fresh list; it repairs changes made behind the
// controller's back. The controller owns the Kubernetes side: informer, handlers, queue,
// Events and status; the reconciler (pkg/reconciler/federation) owns the SPIRE side.
type Controller struct {
	opts   Options
	status *runner.StatusWriter[*spirev1alpha1.ClusterFederatedTrustDomain]
	events *runner.Events

	cftdLister  spirelisters.ClusterFederatedTrustDomainLister
	cftdIndexer cache.Indexer
	cftdSynced  cache.InformerSynced

	// queue holds trust domain names to sync; parking holds those whose sync failed only
	// because SPIRE was unreachable, until it answers again.
	queue   workqueue.TypedRateLimitingInterface[string]
	parking *runner.Parking[string]

	reconciler *fedreconciler.Reconciler
	// spire is what the reconciler writes to.
	spire spire.FederationClient

	// synced is set once the first full resync succeeded; nothing is written before.
	synced atomic.Bool
	// handlers are the event handlers added to the informer, removed when Run returns.
	handlers runner.Handlers
}

// NewController wires the controller to the given informer. It registers an index and event
// handlers but starts nothing: the caller starts the informer factory, then calls Run.
// kubeClient receives Events; it may be nil, and then Events are only logged. spireAPI writes
// the resources' Ready condition; it may be nil, and then status is left alone. With
// opts.DryRun, neither is written to.
func NewController(
	ctx context.Context,
	cftdInformer spireinformers.ClusterFederatedTrustDomainInformer,
	kubeClient clientset.Interface,
	spireAPI spireclientset.Interface,
	spireClient spire.FederationClient,
	opts Options,
) (*Controller, error) {
	if opts.ResyncInterval <= 0 {
		return nil, fmt.Errorf("resync interval must be positive, got %v", opts.ResyncInterval)
	}

	c := &Controller{
		opts:   opts,
		status: newStatusWriter(spireAPI, opts.DryRun),
		events: runner.NewEvents(ctx, ControllerName, kubeClient, opts.DryRun),
		spire:  spireClient,

		cftdLister:  cftdInformer.Lister(),
		cftdIndexer: cftdInformer.Informer().GetIndexer(),
		cftdSynced:  cftdInformer.Informer().HasSynced,

		queue: runner.NewQueue[string](queueName, 10, 100),
	}
	c.parking = runner.NewParking(queueName, c.queue, c.probe)
	var err error
	if c.reconciler, err = c.newReconciler(); err != nil {
		return nil, err
	}

	if err := informercache.AddIndexers(cftdInformer.Informer(), cache.Indexers{trustDomainIndex: indexByTrustDomain}); err != nil {
		return nil, fmt.Errorf("adding trust domain index: %w", err)
	}
	if err := c.addEventHandlers(cftdInformer); err != nil {
		return nil, err
	}
	return c, nil
}

// newReconciler builds the SPIRE side from the controller's options.
func (c *Controller) newReconciler() (*fedreconciler.Reconciler, error) {
	return fedreconciler.NewReconciler(c.spire, c.opts.Options)
}

// HasSynced reports whether the controller has completed its first full resync; until then it
// has written nothing. It is what a readiness probe should report.
func (c *Controller) HasSynced() bool {
	return c.synced.Load()
}

// Waiting is how many trust domains wait for SPIRE to answer.
func (c *Controller) Waiting() int {
	return c.parking.Len()
}

// Run waits for the informer, runs the first full resync (retrying until SPIRE answers), then
// runs workers and the periodic resync until ctx is done. It returns once every goroutine it
// started has ended.
func (c *Controller) Run(ctx context.Context, workers int) {
	runner.Run(ctx, runner.Loop{
		Name:           ControllerName,
		Events:         c.events,
		CachesSynced:   []cache.InformerSynced{c.cftdSynced},
		Resync:         c.fullResync,
		ResyncInterval: c.opts.ResyncInterval,
		MaxResyncShare: c.opts.MaxResyncShare,
		WatchSPIRE:     c.watchSPIRE,
		OnSynced:       func() { c.synced.Store(true) },
		Workers:        []runner.Workers{{Count: workers, Work: c.worker}, {Count: 1, Work: c.parking.Run}},
		Queues:         []runner.ShutDowner{c.queue},
		Handlers:       &c.handlers,
	})
}

// watchSPIRE calls reconnected each time the connection to SPIRE is back after it was lost
// (see spire.WatchReconnects): SPIRE may have come back with other relationships.
func (c *Controller) watchSPIRE(ctx context.Context, reconnected func()) {
	spire.WatchReconnects(ctx, c.spire, reconnected)
}

// probe returns nil once SPIRE answers; relationships are few, so listing them is cheap.
func (c *Controller) probe(ctx context.Context) error {
	_, err := c.spire.ListFederationRelationships(ctx)
	return err
}

func (c *Controller) worker(ctx context.Context) {
	runner.Work(ctx, ControllerName, "trustDomain", c.queue, c.parking, c.syncTrustDomain)
}
