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

package app

import (
	"context"
	"errors"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// warmInformers registers in cc's factories every informer the enabled controllers will ask
// for, narrowed as the config says (see narrowInformers), without constructing the
// controllers: a standby caches what the leader needs, but registers no event handler, so its
// queues stay empty and its metrics quiet. TestWarmInformersAreTheControllers' keeps this list
// equal to what the constructors register. It returns the informers, which a new leader waits
// for to catch up with the API server (awaitCaughtUp).
func warmInformers(cc ControllerContext) []watchedInformer {
	cfg := cc.Config
	var watched []watchedInformer
	// The factories' typed accessors register an informer and return it wrapped; the
	// factories' own InformerFor returns it as registered, able to list again when it was
	// registered so (see relistable).
	kube := func(name string, obj runtime.Object, register func() cache.SharedIndexInformer) {
		register()
		watched = append(watched, watchedInformer{name: name, informer: cc.KubeInformers.InformerFor(obj, nil)})
	}
	spire := func(name string, obj runtime.Object, register func() cache.SharedIndexInformer) {
		register()
		watched = append(watched, watchedInformer{name: name, informer: cc.SpireInformers.InformerFor(obj, nil)})
	}
	if cfg.Reconcile.ClusterSPIFFEIDs || cfg.PodCertificates.Enabled {
		narrowInformers(cc)
		kube("pods", &corev1.Pod{}, cc.KubeInformers.Core().V1().Pods().Informer)
		kube("namespaces", &corev1.Namespace{}, cc.KubeInformers.Core().V1().Namespaces().Informer)
		kube("nodes", &corev1.Node{}, cc.KubeInformers.Core().V1().Nodes().Informer)
		kube("endpointslices", &discoveryv1.EndpointSlice{}, cc.KubeInformers.Discovery().V1().EndpointSlices().Informer)
		spire("clusterspiffeids", &spirev1alpha1.ClusterSPIFFEID{}, cc.SpireInformers.Spire().V1alpha1().ClusterSPIFFEIDs().Informer)
	}
	if cfg.Reconcile.ClusterSPIFFEIDs || cfg.Reconcile.ClusterStaticEntries {
		registerClusterStaticEntryInformer(cc)
		spire("clusterstaticentries", &spirev1alpha1.ClusterStaticEntry{}, cc.SpireInformers.Spire().V1alpha1().ClusterStaticEntries().Informer)
	}
	if cfg.Reconcile.ClusterFederatedTrustDomains {
		registerClusterFederatedTrustDomainInformer(cc)
		spire("clusterfederatedtrustdomains", &spirev1alpha1.ClusterFederatedTrustDomain{}, cc.SpireInformers.Spire().V1alpha1().ClusterFederatedTrustDomains().Informer)
	}
	if cfg.PodCertificates.Enabled {
		requests, bundles := podCertificateInformers(cc)
		kube("podcertificaterequests", &certificatesv1.PodCertificateRequest{}, requests.Informer)
		kube("clustertrustbundles", &certificatesv1.ClusterTrustBundle{}, bundles.Informer)
	}
	return watched
}

// runWarmStandby is leader election in the standalone binary: runElected on factories it owns,
// which it shuts down when ctx ends.
func runWarmStandby(ctx context.Context, cc ControllerContext, workers int, health *Health) error {
	// The informers outlive every leadership but not this function: Shutdown waits for them to
	// stop, so cancel first.
	informerCtx, cancel := context.WithCancel(ctx)
	defer cc.KubeInformers.Shutdown()
	defer cc.SpireInformers.Shutdown()
	defer cancel()
	return runElected(ctx, informerCtx, cc, workers, health)
}

// RegisterInformers registers in cc's factories every informer the controllers of cc.Config
// read, narrowed as the config says, as RunLeaderElected does. An embedder whose own
// controllers share some of these informers calls it before constructing them, so that the
// shared informers are the ones a new leader can bring up to date in a second after an
// outage (an informer registered first by other code is kept, and caught up by its events).
func RegisterInformers(_ context.Context, cc ControllerContext) {
	warmInformers(cc)
}

// RunLeaderElected runs spire-registrar's controllers under leader election
// (cc.Config.LeaderElection), as the spire-registrar binary does, on the caller's clients and
// informer factories: every replica keeps its informers warm, and only the replica holding
// the Lease constructs and runs the controllers. It returns when ctx ends, or with an error
// when the controllers cannot be constructed the first time (a config error); never because
// the Lease was lost or the API server went away. A lost Lease stops the controllers and the
// replica stands by again, with the same caches, until it holds the Lease again.
//
// It starts the factories (Start starts only informers not yet started) and does not shut
// them down: they are the caller's, who may share them with controllers of its own. Call it
// instead of NewControllers and RunControllers, not after them. health, if not nil, reports
// the state to probes (see Health).
func RunLeaderElected(ctx context.Context, cc ControllerContext, workers int, health *Health) error {
	if !cc.Config.LeaderElection.Enabled {
		return errors.New("RunLeaderElected: leaderElection.leaderElect is off in the config")
	}
	return runElected(ctx, ctx, cc, workers, health)
}

// runElected runs the controllers under leader election with warm standbys, as
// controller-runtime does: every replica starts the informers and fills its caches before it
// asks for the Lease, and only the leader constructs and runs the controllers. Taking over
// then costs the lease, catching up, and the first full resync with SPIRE, not a list of
// every pod.
//
// A standby only reads the Kubernetes API. It does not list SPIRE ahead: the new leader must
// list it anyway, since the old leader wrote to it until it stopped, and SPIRE has no watch
// to keep such a list current. Each leadership constructs its controllers anew, with empty
// queues and a SPIRE entry cache its first full resync fills, on the same informers.
// informerCtx bounds the informers the factories start.
func runElected(ctx, informerCtx context.Context, cc ControllerContext, workers int, health *Health) error {
	logger := klog.FromContext(ctx)
	if health == nil {
		health = &Health{}
	}
	election, err := newLeaderElection(cc.KubeClient, cc.Config.LeaderElection, health)
	if err != nil {
		return err
	}
	// A standby is ready while it warms up, as it is while it stands by and while it leads:
	// the SPIRE server it runs beside must not leave its Service for the Lease's sake.
	health.setPhase(phaseWarming)
	health.electing.Store(true)
	informers := warmInformers(cc)
	start := time.Now()
	cc.KubeInformers.Start(informerCtx.Done())
	cc.SpireInformers.Start(informerCtx.Done())
	// Without cacheSyncTimeout, wait as long as it takes: the controllers would wait too.
	if err := waitForCacheSync(ctx, cc.Config.CacheSyncTimeout, cc.KubeInformers, cc.SpireInformers); err != nil {
		return err
	}
	cc.KubeInformers.WaitForCacheSync(ctx.Done())
	cc.SpireInformers.WaitForCacheSync(ctx.Done())
	if ctx.Err() != nil {
		return nil
	}
	logger.Info("Informer caches synced; asking for the lease", "duration", time.Since(start))
	return election.run(ctx, func(ctx context.Context, leaseRV string, lost <-chan struct{}) (bool, error) {
		return runLeader(ctx, informerCtx, cc, workers, health, informers, leaseRV, lost)
	})
}

// runLeader is one leadership: it waits for the informers to catch up with the API server as
// of the Lease's acquisition (leaseRV), then constructs the controllers on the warm factories
// and runs them until ctx, the leadership, ends. Their event handlers, added to informers
// that have synced, receive every cached object as an add, as on a cold start but without
// listing the API; the controllers remove them when they stop. Nothing is written before
// each controller's first full resync, which lists SPIRE afresh: another replica may have
// written to it since this one last led. When the Lease is lost (lost closed), SPIRE writes
// already sent are cancelled and those not yet sent dropped; on shutdown they are seen
// through, so that the Lease is released only after them. informerCtx bounds any informer a
// controller asks for that warmInformers did not start.
func runLeader(ctx, informerCtx context.Context, cc ControllerContext, workers int, health *Health, informers []watchedInformer, leaseRV string, lost <-chan struct{}) (bool, error) {
	if err := awaitCaughtUp(ctx, informers, leaseRV); err != nil {
		return false, nil
	}
	controllers, release, err := newControllers(ctx, cc)
	if err != nil {
		return false, err
	}
	stopped := make(chan struct{})
	aborted := make(chan struct{})
	go func() {
		defer close(aborted)
		select {
		case <-lost:
			release(true)
		case <-stopped:
		}
	}()
	defer func() {
		close(stopped)
		<-aborted
		release(false)
	}()
	health.setControllers(controllers)
	defer health.setControllers(nil)
	cc.KubeInformers.Start(informerCtx.Done())
	cc.SpireInformers.Start(informerCtx.Done())
	if ctx.Err() == nil {
		health.setPhase(phaseLeading)
	}
	RunControllers(ctx, controllers, workers)
	return true, nil
}
