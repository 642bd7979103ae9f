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
	"time"

	"k8s.io/klog/v2"
)

// warmInformers registers in cc's factories every informer the enabled controllers will ask
// for, narrowed as the config says (see narrowInformers), without constructing the
// controllers: a standby caches what the leader needs, but registers no event handler, so its
// queues stay empty and its metrics quiet. TestWarmInformersAreTheControllers' keeps this list
// equal to what the constructors register.
//
// Pods are cached as the leader will cache them, projected to what the ClusterSPIFFEIDs of
// the controller's class read now: a leader keeps the projections a standby made until the
// pods change, which at 30k pods is the difference between about 0.7 and 7 KB a pod.
func warmInformers(ctx context.Context, cc ControllerContext) {
	cfg := cc.Config
	if cfg.Reconcile.ClusterSPIFFEIDs {
		narrowInformers(cc)
		narrowPodProjection(ctx, cc)
		cc.KubeInformers.Core().V1().Pods().Informer()
		cc.KubeInformers.Core().V1().Namespaces().Informer()
		cc.KubeInformers.Core().V1().Nodes().Informer()
		cc.KubeInformers.Discovery().V1().EndpointSlices().Informer()
		cc.SpireInformers.Spire().V1alpha1().ClusterSPIFFEIDs().Informer()
	}
	if cfg.Reconcile.ClusterSPIFFEIDs || cfg.Reconcile.ClusterStaticEntries {
		cc.SpireInformers.Spire().V1alpha1().ClusterStaticEntries().Informer()
	}
	if cfg.Reconcile.ClusterFederatedTrustDomains {
		cc.SpireInformers.Spire().V1alpha1().ClusterFederatedTrustDomains().Informer()
	}
	if cfg.PodCertificates.Enabled {
		narrowInformers(cc)
		narrowPodProjection(ctx, cc)
		requests, bundles := podCertificateInformers(cc)
		requests.Informer()
		bundles.Informer()
		cc.KubeInformers.Core().V1().Pods().Informer()
		cc.KubeInformers.Core().V1().Namespaces().Informer()
		cc.KubeInformers.Core().V1().Nodes().Informer()
		cc.KubeInformers.Discovery().V1().EndpointSlices().Informer()
		cc.SpireInformers.Spire().V1alpha1().ClusterSPIFFEIDs().Informer()
	}
}

// runWarmStandby runs the controllers under leader election with warm standbys, as
// controller-runtime does: every replica starts the informers and fills its caches before it
// asks for the Lease, and only the leader constructs and runs the controllers. Taking over
// then costs the lease and the first full resync with SPIRE, not a list of every pod.
//
// A standby only reads the Kubernetes API. It does not list SPIRE ahead: the new leader must
// list it anyway, since the old leader wrote to it until it died, and SPIRE has no watch to
// keep such a list current. cc carries the clients and the factories, not yet started.
func runWarmStandby(ctx context.Context, cc ControllerContext, workers int, health *Health) error {
	logger := klog.FromContext(ctx)
	// A standby is ready while it warms up, as before: readiness is about the leader's sync
	// with SPIRE, and the SPIRE server this runs beside must not leave its Service meanwhile.
	health.electing.Store(true)
	warmInformers(ctx, cc)
	// The informers outlive a leadership (its context ends first) but not this function:
	// Shutdown waits for them to stop, so cancel first.
	informerCtx, cancel := context.WithCancel(ctx)
	defer cc.KubeInformers.Shutdown()
	defer cc.SpireInformers.Shutdown()
	defer cancel()
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

	var runErr error
	if err := runWithLeaderElection(ctx, cc.KubeClient, cc.Config.LeaderElection, health, func(ctx context.Context) {
		runErr = runLeader(ctx, informerCtx, cc, workers, health)
	}); err != nil {
		return err
	}
	return runErr
}

// runLeader constructs the controllers on the warm factories and runs them until ctx, the
// leadership, ends. Their event handlers, added to informers that have synced, receive every
// cached object as an add, as on a cold start but without listing the API. informerCtx
// bounds any informer a controller asks for that warmInformers did not start.
func runLeader(ctx, informerCtx context.Context, cc ControllerContext, workers int, health *Health) error {
	controllers, release, err := newControllers(ctx, cc)
	if err != nil {
		return err
	}
	defer release()
	health.setControllers(controllers)
	cc.KubeInformers.Start(informerCtx.Done())
	cc.SpireInformers.Start(informerCtx.Done())
	RunControllers(ctx, controllers, workers)
	return nil
}
