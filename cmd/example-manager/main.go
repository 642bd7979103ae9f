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

// Command example-manager shows how a platform team embeds spire-registrar in a manager binary
// of its own: one set of clients and shared informer factories feeds spire-registrar's
// controllers and the team's own controller (here a trivial one that records how many pods
// each namespace has in a ConfigMap), all started together, as in kube-controller-manager.
// With leaderElection.leaderElect in the config, spire-registrar's controllers run only while
// this replica holds the Lease, and a lost Lease (an API server outage, say) stops them until
// the replica holds it again: the binary keeps running, and so does its own controller.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "Path to a kubeconfig; in-cluster config when empty.")
	configFile := flag.String("config", "", "spire-registrar config file (ControllerManagerConfig).")
	statusNamespace := flag.String("status-namespace", "default", "Namespace of the ConfigMap the example controller writes.")
	flag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, *kubeconfig, *configFile, *statusNamespace); err != nil {
		klog.ErrorS(err, "example-manager failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

func run(ctx context.Context, kubeconfig, configFile, statusNamespace string) error {
	cfg, err := config.Load(configFile, false)
	if err != nil {
		return err
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("building client config: %w", err)
	}
	kubeClient, err := clientset.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	spireAPIClient, err := spireclientset.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	// The informers get clients whose connections wait for an API server that is away, so
	// that they see it again within a second of its return (see app.InformerConfig).
	informerKube, err := clientset.NewForConfig(app.InformerConfig(restConfig))
	if err != nil {
		return err
	}
	informerSpire, err := spireclientset.NewForConfig(app.InformerConfig(restConfig))
	if err != nil {
		return err
	}
	spireClient, err := app.DialSPIRE(ctx, cfg)
	if err != nil {
		return err
	}
	defer spireClient.Close()

	// Setting client-go's process-wide workqueue metrics provider is the binary's choice; this
	// one reports the queues to spire-registrar's metrics.Registry.
	metrics.SetWorkqueueProvider()

	// One pair of factories for everything the binary runs: the pod informer below is the
	// same one spire-registrar's entry controller uses, so pods are cached once.
	kubeInformers, spireInformers := app.NewInformerFactories(informerKube, informerSpire)
	cc := app.ControllerContext{
		Config: cfg, KubeClient: kubeClient, SpireAPIClient: spireAPIClient,
		KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: spireClient,
	}
	health := &app.Health{}
	if cfg.HealthProbeBindAddress != config.DisabledAddress {
		if _, err := app.Serve(ctx, "health", cfg.HealthProbeBindAddress, health.Handler(cfg.LivenessEndpointName, cfg.ReadinessEndpointName)); err != nil {
			return err
		}
	}

	if cfg.LeaderElection.Enabled {
		// spire-registrar's informers first, so that the pod informer shared with the
		// controller below is spire-registrar's; then its controllers, under the Lease, and
		// ours, on every replica.
		app.RegisterInformers(ctx, cc)
		own, err := newPodCountController(kubeInformers.Core().V1().Pods(), kubeClient, statusNamespace)
		if err != nil {
			return err
		}
		defer kubeInformers.Shutdown()
		defer spireInformers.Shutdown()
		var wg sync.WaitGroup
		var runErr error
		wg.Go(func() { runErr = app.RunLeaderElected(ctx, cc, 4, health) })
		wg.Go(func() { own.Run(ctx) })
		wg.Wait()
		return runErr
	}

	// 1. Construct every controller before starting the factories, so that the informers they
	//    ask for are started too. SPIRE is the client as dialled: spire-registrar puts its
	//    metrics and batching (or, with DryRun, its dry-run client) around it.
	registrar, err := app.NewControllers(ctx, cc)
	if err != nil {
		return err
	}
	own, err := newPodCountController(kubeInformers.Core().V1().Pods(), kubeClient, statusNamespace)
	if err != nil {
		return err
	}
	health.Watch(registrar)

	// 2. Start the shared factories.
	kubeInformers.Start(ctx.Done())
	spireInformers.Start(ctx.Done())
	defer kubeInformers.Shutdown()
	defer spireInformers.Shutdown()

	// 3. Run all controllers until the context ends.
	var wg sync.WaitGroup
	wg.Go(func() { app.RunControllers(ctx, registrar, 4) })
	wg.Go(func() { own.Run(ctx) })
	wg.Wait()
	return nil
}
