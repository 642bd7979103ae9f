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

// Command spire-registrar keeps a SPIRE server's registration entries and federation
// relationships equal to what the cluster's ClusterSPIFFEID, ClusterStaticEntry and
// ClusterFederatedTrustDomain resources declare, or, in static mode, what manifest files do.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// options are the command-line flags.
type options struct {
	kubeconfig string
	master     string
	configFile string
	workers    int
	dryRun     bool

	// These override the config file's fields of the same meaning when set.
	metricsBindAddress      string
	healthProbeBindAddress  string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	set                     map[string]bool
}

func main() {
	klog.InitFlags(nil)
	var opts options
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Only required if out-of-cluster.")
	flag.StringVar(&opts.master, "master", "", "The address of the Kubernetes API server. Overrides any value in kubeconfig. Only required if out-of-cluster.")
	flag.StringVar(&opts.configFile, "config", "", "Path to the config file (spire-controller-manager's ControllerManagerConfig format). Required.")
	flag.IntVar(&opts.workers, "workers", 10, "Number of pods synced concurrently.")
	flag.BoolVar(&opts.dryRun, "dry-run", false, "Compute and log every change (create, update, delete, with the entry and the reason) without writing to SPIRE.")
	flag.StringVar(&opts.metricsBindAddress, "metrics-bind-address", "", "Address to serve /metrics on; \"0\" disables. Overrides metrics.bindAddress.")
	flag.StringVar(&opts.healthProbeBindAddress, "health-probe-bind-address", "", "Address to serve /healthz and /readyz on; \"0\" disables. Overrides health.healthProbeBindAddress.")
	flag.BoolVar(&opts.leaderElect, "leader-elect", false, "Run only while holding a Lease, so one of several replicas writes. Overrides leaderElection.leaderElect.")
	flag.StringVar(&opts.leaderElectionID, "leader-election-id", "", "Name of the Lease. Overrides leaderElection.resourceName.")
	flag.StringVar(&opts.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the Lease (default: the pod's). Overrides leaderElection.resourceNamespace.")
	flag.Parse()
	opts.set = map[string]bool{}
	flag.Visit(func(f *flag.Flag) { opts.set[f.Name] = true })

	ctx := signalContext()
	if err := run(ctx, opts); err != nil {
		klog.ErrorS(err, "spire-registrar failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

func run(ctx context.Context, opts options) error {
	logger := klog.FromContext(ctx)
	if opts.configFile == "" {
		return fmt.Errorf("--config is required")
	}
	if opts.workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", opts.workers)
	}
	cfg, err := config.Load(opts.configFile)
	if err != nil {
		return err
	}
	opts.override(cfg)
	static := cfg.StaticManifestPath != ""
	if static && cfg.LeaderElection.Enabled {
		return fmt.Errorf("--leader-elect is not available with staticManifestPath: static mode has no Kubernetes API to hold a Lease in")
	}
	if static && (opts.kubeconfig != "" || opts.master != "") {
		logger.Info("Warning: --kubeconfig and --master are not used in static mode")
	}
	if !static && cfg.ClusterDomain == "" {
		detectCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		domain, err := app.DetectClusterDomain(detectCtx)
		cancel()
		if err != nil {
			logger.Info("Warning: clusterDomain is not set and could not be detected; DNS names that need it are left out", "err", err)
		} else {
			cfg.ClusterDomain = domain
			logger.Info("Detected cluster domain", "clusterDomain", domain)
		}
	}

	spireClient, err := spire.Dial(ctx, cfg.SPIREServerSocketPath)
	if err != nil {
		return fmt.Errorf("connecting to SPIRE server at %s: %w", cfg.SPIREServerSocketPath, err)
	}
	defer spireClient.Close()

	health := &app.Health{}
	if cfg.MetricsBindAddress != config.DisabledAddress {
		if _, err := app.Serve(ctx, "metrics", cfg.MetricsBindAddress, app.MetricsHandler()); err != nil {
			return err
		}
	}
	if cfg.HealthProbeBindAddress != config.DisabledAddress {
		if _, err := app.Serve(ctx, "health", cfg.HealthProbeBindAddress, health.Handler(cfg.LivenessEndpointName, cfg.ReadinessEndpointName)); err != nil {
			return err
		}
	}

	logger.Info("Starting spire-registrar", "trustDomain", cfg.TrustDomain, "clusterName", cfg.ClusterName,
		"spireServerSocketPath", cfg.SPIREServerSocketPath, "gcInterval", cfg.GCInterval, "workers", opts.workers,
		"leaderElection", cfg.LeaderElection.Enabled, "staticManifestPath", cfg.StaticManifestPath)
	// Metrics count the RPCs SPIRE serves; concurrent workers' entry writes share them.
	var api spire.API = metrics.InstrumentSPIRE(spireClient)
	if opts.dryRun {
		logger.Info("Dry run: SPIRE is read, never written; planned changes are logged")
		api = spire.DryRun(api)
	} else {
		batched := spire.NewBatchedAPI(api, spire.BatchingOptions{})
		defer batched.Close()
		api = batched
	}
	if static {
		logger.Info("Static mode: the manifests of staticManifestPath are the declared state; no Kubernetes API is used")
		return app.RunStatic(ctx, cfg, api, opts.dryRun, opts.workers, health)
	}
	return runInCluster(ctx, opts, cfg, api, health)
}

// runInCluster runs the controllers on a Kubernetes API, under leader election when asked.
func runInCluster(ctx context.Context, opts options, cfg *config.Config, api spire.API, health *app.Health) error {
	// With neither flag set this falls back to the in-cluster config.
	restConfig, err := clientcmd.BuildConfigFromFlags(opts.master, opts.kubeconfig)
	if err != nil {
		return fmt.Errorf("building Kubernetes client config: %w", err)
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = "spire-registrar"
	// Status writes for many ClusterSPIFFEIDs and Events come in bursts.
	restConfig.QPS, restConfig.Burst = 50, 100
	kubeClient, err := clientset.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	spireAPIClient, err := spireclientset.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("creating spire.spiffe.io client: %w", err)
	}

	runControllers := func(ctx context.Context) error {
		// Informers start with leadership, as in kube-controller-manager: a standby holds no caches.
		kubeInformers, spireInformers := app.NewInformerFactories(kubeClient, spireAPIClient)
		return app.Run(ctx, app.ControllerContext{
			Config:         cfg,
			KubeClient:     kubeClient,
			SpireAPIClient: spireAPIClient,
			KubeInformers:  kubeInformers,
			SpireInformers: spireInformers,
			SPIRE:          api,
			DryRun:         opts.dryRun,
		}, opts.workers, health)
	}
	if !cfg.LeaderElection.Enabled {
		return runControllers(ctx)
	}
	var runErr error
	if err := app.RunWithLeaderElection(ctx, kubeClient, cfg.LeaderElection, health, func(ctx context.Context) {
		runErr = runControllers(ctx)
	}); err != nil {
		return err
	}
	return runErr
}

// override applies the flags the user set over the config file's fields.
func (o *options) override(cfg *config.Config) {
	if o.set["metrics-bind-address"] {
		cfg.MetricsBindAddress = o.metricsBindAddress
	}
	if o.set["health-probe-bind-address"] {
		cfg.HealthProbeBindAddress = o.healthProbeBindAddress
	}
	if o.set["leader-elect"] {
		cfg.LeaderElection.Enabled = o.leaderElect
	}
	if o.set["leader-election-id"] {
		cfg.LeaderElection.ResourceName = o.leaderElectionID
	}
	if o.set["leader-election-namespace"] {
		cfg.LeaderElection.ResourceNamespace = o.leaderElectionNamespace
	}
}

// signalContext returns a context cancelled by the first SIGINT or SIGTERM, so the controller
// shuts down cleanly; a second signal exits at once.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		klog.Info("Shutting down; send the signal again to exit immediately")
		cancel()
		<-signals
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}()
	return ctx
}
