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

// Package app constructs and runs spire-registrar's controllers. It is what the
// spire-registrar binary runs, and what a larger manager binary embeds: construct the
// controllers from your own clients and shared informer factories, start the factories, then
// run the controllers, as kube-controller-manager does with its controller descriptors.
package app

import (
	"context"
	"fmt"
	"io"
	"sync"

	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/controller/entry"
	"github.com/spire-registrar/spire-registrar/pkg/controller/federation"
	"github.com/spire-registrar/spire-registrar/pkg/controller/podcertificate"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/static"
)

// ControllerContext is what controllers are constructed from.
type ControllerContext struct {
	Config *config.Config
	// KubeClient is used for Events; SpireAPIClient for the status of our resources.
	KubeClient     clientset.Interface
	SpireAPIClient spireclientset.Interface
	// PodCertificateClient, when set, is the pod certificate signer's own client, so that a
	// burst of requests neither waits behind nor delays the other controllers' writes under
	// one client's rate limit; KubeClient serves otherwise.
	PodCertificateClient clientset.Interface
	// KubeInformers and SpireInformers are shared with any other controller of the binary.
	// Constructors only register the informers they need; the caller starts the factories.
	KubeInformers  informers.SharedInformerFactory
	SpireInformers spireinformers.SharedInformerFactory
	// SPIRE is the SPIRE server's admin API as dialled (see DialSPIRE), without decorators:
	// the controllers get it through the chain built here (metrics, then batching, or the
	// dry-run client).
	SPIRE spire.API
	// Authority is SPIRE's CA API over the same connection (taken from SPIRE when it is a
	// *spire.Client): the pod certificate controller's downstream CA and trust bundle.
	Authority podcertificate.Authority
	// SPIREIdentity is the SPIFFE ID SPIRE knows the controllers by when they reach it over
	// mTLS (taken from SPIRE when it is a *spire.Client dialled so). Its entries are never
	// deleted: the operator creates that admin entry, and deleting it would lock them out.
	SPIREIdentity string
	// DryRun computes and logs every change and writes nothing: the SPIRE client is replaced
	// for writes by spire.DryRun, and the controllers write no status and no Event.
	DryRun bool
	// DryRunOutput, with DryRun, receives every planned SPIRE write as a JSON line.
	DryRunOutput io.Writer
	// ReadEndpoints makes the controllers read v1 Endpoints where they would read
	// EndpointSlices, for credentials that may read only those: the official SPIRE Helm
	// chart's RBAC for spire-controller-manager grants Endpoints and not EndpointSlices.
	ReadEndpoints bool
	// EventsOnlyLogged logs Events instead of writing them, for credentials that may not write
	// Events in the default namespace, where those about cluster-scoped resources belong (the
	// official chart's RBAC grants Events only in the SPIRE server's namespace).
	EventsOnlyLogged bool
	// StaticSource, when set, is static mode: the ClusterStaticEntries and
	// ClusterFederatedTrustDomains come from its manifest directory instead of the informer
	// factories, and without Kubernetes clients no status is kept and Events are logged.
	StaticSource *static.Source
}

// eventsClient is the client the controllers write Events with: none when they may only log
// them.
func (cc ControllerContext) eventsClient() clientset.Interface {
	if cc.EventsOnlyLogged {
		return nil
	}
	return cc.KubeClient
}

// podClient is the client the controllers read pods whole with (see informercache.WholePods).
func (cc ControllerContext) podClient() corev1client.PodsGetter {
	if cc.KubeClient == nil {
		return nil
	}
	return cc.KubeClient.CoreV1()
}

// Controller is a constructed controller, ready to run once the informer factories started.
type Controller interface {
	// Name identifies the controller in logs.
	Name() string
	// Run runs the controller with the given number of workers until ctx is done.
	Run(ctx context.Context, workers int)
	// HasSynced reports whether the controller completed its first sync with SPIRE.
	HasSynced() bool
}

// descriptor names a controller and says how to construct it.
type descriptor struct {
	Name string
	// Enabled reports whether the config asks for the controller.
	Enabled     func(cfg *config.Config) bool
	Constructor func(ctx context.Context, cc ControllerContext) (Controller, error)
}

// descriptors returns every controller spire-registrar has.
func descriptors() []descriptor {
	return []descriptor{
		{
			Name: entry.ControllerName,
			Enabled: func(cfg *config.Config) bool {
				return cfg.Reconcile.ClusterSPIFFEIDs || cfg.Reconcile.ClusterStaticEntries
			},
			Constructor: newEntryController,
		},
		{
			Name:        federation.ControllerName,
			Enabled:     func(cfg *config.Config) bool { return cfg.Reconcile.ClusterFederatedTrustDomains },
			Constructor: newFederationController,
		},
		{
			Name:        podcertificate.ControllerName,
			Enabled:     func(cfg *config.Config) bool { return cfg.PodCertificates.Enabled },
			Constructor: newPodCertificateController,
		},
	}
}

// NewInformerFactories returns shared informer factories for the controllers and any other
// controller of the binary. Objects are cached without what no controller reads (see
// informercache.NewTrim): of a pod its metadata, the spec fields nearly every template reads,
// its phase and PodScheduled condition, as a *corev1.Pod the factory's pod lister reads.
func NewInformerFactories(kubeClient clientset.Interface, spireAPIClient spireclientset.Interface) (informers.SharedInformerFactory, spireinformers.SharedInformerFactory) {
	kube := informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithTransform(informercache.NewTrim()))
	spire := spireinformers.NewSharedInformerFactoryWithOptions(spireAPIClient, 0, spireinformers.WithTransform(informercache.NewTrim()))
	return kube, spire
}

// NewControllers constructs every controller from the context. Call it before starting the
// informer factories, so that the informers the controllers register are started too. The
// controllers share one SPIRE client chain built from cc (see ControllerContext.SPIRE), which
// is released when ctx is done.
func NewControllers(ctx context.Context, cc ControllerContext) ([]Controller, error) {
	controllers, release, err := newControllers(ctx, cc)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { release(false) })
	return controllers, nil
}

// newControllers constructs every enabled controller on one SPIRE client chain, and returns
// the func that releases the chain (see spireChain).
func newControllers(ctx context.Context, cc ControllerContext) ([]Controller, func(abort bool), error) {
	if cc.SPIREIdentity == "" {
		cc.SPIREIdentity = ownIdentity(cc.SPIRE)
	}
	if c, ok := cc.SPIRE.(*spire.Client); ok && cc.Authority == nil {
		cc.Authority = c.Authority()
	}
	api, release := spireChain(cc)
	cc.SPIRE = api
	var controllers []Controller
	for _, d := range descriptors() {
		if !d.Enabled(cc.Config) {
			klog.FromContext(ctx).Info("Controller disabled by the reconcile setting", "controller", d.Name)
			continue
		}
		c, err := d.Constructor(klog.NewContext(ctx, klog.LoggerWithName(klog.FromContext(ctx), d.Name)), cc)
		if err != nil {
			release(false)
			return nil, nil, fmt.Errorf("constructing %s: %w", d.Name, err)
		}
		controllers = append(controllers, c)
	}
	return controllers, release, nil
}

// RunControllers runs the controllers until ctx is done and returns when all have stopped.
func RunControllers(ctx context.Context, controllers []Controller, workers int) {
	var wg sync.WaitGroup
	for _, c := range controllers {
		wg.Go(func() {
			c.Run(klog.NewContext(ctx, klog.LoggerWithName(klog.FromContext(ctx), c.Name())), workers)
		})
	}
	wg.Wait()
}

// Run is the whole life of a standalone spire-registrar: construct the controllers, start the
// informer factories, run until ctx is done, and shut the factories down. health, if not nil,
// is told about the controllers so that readiness follows their first sync.
func Run(ctx context.Context, cc ControllerContext, workers int, health *Health) error {
	return run(ctx, cc, workers, health, informerFeed{
		start: func(ctx context.Context) {
			cc.KubeInformers.Start(ctx.Done())
			cc.SpireInformers.Start(ctx.Done())
		},
		shutdown: func() {
			cc.SpireInformers.Shutdown()
			cc.KubeInformers.Shutdown()
		},
		waitForSync: func(ctx context.Context) error {
			return waitForCacheSync(ctx, cc.Config.CacheSyncTimeout, cc.KubeInformers, cc.SpireInformers)
		},
	})
}

// informerFeed is what fills the controllers' informers: the informer factories in a
// cluster, the manifest files in static mode.
type informerFeed struct {
	start    func(ctx context.Context)
	shutdown func()
	// waitForSync, if set, fails when the informers do not sync in time.
	waitForSync func(ctx context.Context) error
}

// run is the one start sequence of a spire-registrar that does not stand by for a Lease:
// construct the controllers on one SPIRE client chain, tell health about them, start what
// fills their informers (the controllers registered theirs by then), run the controllers until
// ctx is done or the informers fail to sync, then stop the feed and release the chain.
func run(ctx context.Context, cc ControllerContext, workers int, health *Health, feed informerFeed) error {
	controllers, release, err := newControllers(ctx, cc)
	if err != nil {
		return err
	}
	defer release(false)
	if health != nil {
		health.setControllers(controllers)
	}
	feed.start(ctx)
	defer feed.shutdown()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { RunControllers(runCtx, controllers, workers) })
	if feed.waitForSync != nil {
		if err = feed.waitForSync(runCtx); err != nil {
			cancel()
		}
	}
	wg.Wait()
	return err
}
