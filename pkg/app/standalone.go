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
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/webhook"
)

// RunStandalone is the whole life of the spire-registrar binary: load the config, set up
// logging, serve metrics and health, and run the controllers (in the cluster, under leader
// election when asked, or in static mode) until ctx is done. fs is the flag set opts and
// klog's flags were parsed from.
func RunStandalone(ctx context.Context, opts *Options, fs *flag.FlagSet) error {
	if opts.ConfigFile == "" {
		return errors.New("--config is required")
	}
	if opts.Workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", opts.Workers)
	}
	if opts.DryRunOutput != "" && !opts.DryRun {
		return errors.New("--dry-run-output needs --dry-run")
	}
	cfg, err := config.Load(opts.ConfigFile, opts.ExpandEnv)
	if err != nil {
		return err
	}
	logging, err := loggingSettings(cfg, opts.Log, opts, currentVerbosity(fs))
	if err != nil {
		return err
	}
	if err := applyLogging(logging, fs); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	for _, note := range logging.Notes {
		logger.Info("Warning: " + note)
	}
	// As soon as logging is set up: a misspelt field may be why start-up fails further on.
	reportConfigFields(logger, cfg)
	if !(opts.MaxResyncShare > 0 && opts.MaxResyncShare <= 1) {
		return fmt.Errorf("--max-resync-share must be more than 0 and at most 1, got %v", opts.MaxResyncShare)
	}
	if opts.WriteSpread < 1 {
		return fmt.Errorf("--write-spread must be at least 1, got %d", opts.WriteSpread)
	}
	opts.override(cfg)
	if opts.SPIREServerAddress != "" || opts.WorkloadAPISocket != "" {
		if err := cfg.UseSPIREServerAddressFlags(opts.SPIREServerAddress, opts.WorkloadAPISocket); err != nil {
			return err
		}
	}
	if opts.SPIREAPISocket != "" {
		if cfg.UseSPIREAPISocketFlag(opts.SPIREAPISocket) {
			logger.Info("Warning: --spire-api-socket is deprecated; set spireServerSocketPath in the config file")
		} else if cfg.SPIREServerAddress != "" {
			logger.Info("Warning: ignoring the deprecated --spire-api-socket: the config file sets spireServerAddress")
		} else {
			logger.Info("Warning: ignoring the deprecated --spire-api-socket: the config file sets spireServerSocketPath")
		}
	}
	if err := cfg.CheckPodCertificatesConnection(); err != nil {
		return err
	}
	applyContainerMemoryLimit(logger)
	// The binary, not the library, sets client-go's process-wide workqueue metrics provider,
	// before any controller creates its queues.
	metrics.SetWorkqueueProvider()

	static := cfg.StaticManifestPath != ""
	if static && cfg.LeaderElection.Enabled {
		return fmt.Errorf("--leader-elect is not available with staticManifestPath: static mode has no Kubernetes API to hold a Lease in")
	}
	if static && (opts.Kubeconfig != "" || opts.Master != "") {
		logger.Info("Warning: --kubeconfig and --master are not used in static mode")
	}
	if !static && cfg.ClusterDomain == "" {
		detectCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		domain, err := DetectClusterDomain(detectCtx)
		cancel()
		if err != nil {
			logger.Info("Warning: clusterDomain is not set and could not be detected; DNS names that need it are left out", "err", err)
		} else {
			cfg.ClusterDomain = domain
			logger.Info("Detected cluster domain", "clusterDomain", domain)
		}
	}

	if opts.Profiling && cfg.MetricsBindAddress == config.DisabledAddress {
		return fmt.Errorf("--profiling needs metrics.bindAddress (or --metrics-bind-address): the profiles are served there")
	}
	health := &Health{}
	if cfg.MetricsBindAddress != config.DisabledAddress {
		handler := MetricsHandler()
		if opts.Profiling {
			handler = withProfiling(handler)
		}
		if _, err := Serve(ctx, "metrics", cfg.MetricsBindAddress, handler); err != nil {
			return err
		}
	}
	if cfg.HealthProbeBindAddress != config.DisabledAddress {
		if _, err := Serve(ctx, "health", cfg.HealthProbeBindAddress, health.Handler(cfg.LivenessEndpointName, cfg.ReadinessEndpointName)); err != nil {
			return err
		}
	}

	// Served before dialling SPIRE: over mTLS the dial waits for an X509-SVID from the agent,
	// during which the process is alive but not ready.
	spireClient, err := DialSPIRE(ctx, cfg)
	if err != nil {
		return err
	}
	defer spireClient.Close()
	// What the client learns of SPIRE's reachability is reported by /readyz and the metrics.
	health.spire.Store(spireClient.Reachability())
	metrics.ReportSPIREReachability(spireClient.Reachability())

	logger.Info("Starting spire-registrar", "version", Version(), "trustDomain", cfg.TrustDomain, "clusterName", cfg.ClusterName,
		"spireServerSocketPath", cfg.SPIREServerSocketPath, "spireServerAddress", cfg.SPIREServerAddress, "gcInterval", cfg.GCInterval, "workers", opts.Workers,
		"leaderElection", cfg.LeaderElection.Enabled, "staticManifestPath", cfg.StaticManifestPath)
	cc := ControllerContext{Config: cfg, SPIRE: spireClient, DryRun: opts.DryRun}
	if opts.DryRun {
		logger.Info("Dry run: nothing is written, not to SPIRE, not status, not Events; planned changes are logged", "dryRunOutput", opts.DryRunOutput)
	}
	if opts.DryRunOutput != "" {
		plan, err := os.Create(opts.DryRunOutput)
		if err != nil {
			return fmt.Errorf("--dry-run-output: %w", err)
		}
		defer func() {
			if err := plan.Close(); err != nil {
				logger.Error(err, "Closing the dry-run plan", "file", opts.DryRunOutput)
			}
		}()
		cc.DryRunOutput = plan
	}
	return runWithShutdownTimeout(ctx, cfg.GracefulShutdownTimeout, func() error {
		if static {
			logger.Info("Static mode: the manifests of staticManifestPath are the declared state; no Kubernetes API is used")
			return RunStatic(ctx, cc, opts.Workers, health)
		}
		return runInCluster(ctx, opts, cc, spireClient.Authority(), health)
	})
}

// reportConfigFields says once which config fields were accepted without effect, and why;
// warns of each field that was ignored as unknown, naming the field probably meant when there
// is one, and of each field set more than once; and sets the metrics that count those two.
func reportConfigFields(logger klog.Logger, cfg *config.Config) {
	for _, u := range cfg.Unused {
		logger.Info("Config field accepted but without effect", "field", u.Field, "reason", u.Reason)
	}
	for _, u := range cfg.Unknown {
		if u.Suggestion != "" {
			logger.Info("Warning: ignoring an unknown config field, probably misspelt", "field", u.Field, "didYouMean", u.Suggestion)
		} else {
			logger.Info("Warning: ignoring an unknown config field, perhaps one of a newer spire-controller-manager", "field", u.Field)
		}
	}
	for _, field := range cfg.Duplicates {
		logger.Info("Warning: config field set more than once; the last value is used", "field", field)
	}
	metrics.ConfigUnknownFields.Set(float64(len(cfg.Unknown)))
	metrics.ConfigDuplicateFields.Set(float64(len(cfg.Duplicates)))
}

// builtInKindsConfig returns a copy of config for clients of Kubernetes' built-in kinds, which
// it asks for in protobuf as kube-controller-manager does: decoding the pods of a large
// cluster at start-up costs a fraction of what JSON does. Custom resources have no protobuf
// encoding, so their clients keep config's JSON.
func builtInKindsConfig(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// runInCluster runs the controllers on a Kubernetes API, under leader election when asked, and
// the admission webhook on every replica when the config names one. cc carries the config and
// the SPIRE client; the clients and informers are added here. minter is SPIRE's SVID API, for
// the webhook's certificate.
func runInCluster(ctx context.Context, opts *Options, cc ControllerContext, minter webhook.Minter, health *Health) error {
	cfg := cc.Config
	// With neither flag set this falls back to the in-cluster config.
	restConfig, err := clientcmd.BuildConfigFromFlags(opts.Master, opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("building Kubernetes client config: %w", err)
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = "spire-registrar"
	// Status writes for many ClusterSPIFFEIDs and Events come in bursts.
	restConfig.QPS, restConfig.Burst = 50, 100
	kubeClient, err := clientset.NewForConfig(builtInKindsConfig(restConfig))
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	spireAPIClient, err := spireclientset.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("creating spire.spiffe.io client: %w", err)
	}
	if cfg.PodCertificates.Enabled {
		// One status write a request: a rollout's requests come in bursts, which this client's
		// own rate limit serves without holding up the other controllers' writes.
		signer := builtInKindsConfig(restConfig)
		signer.UserAgent = "spire-registrar/pod-certificates"
		signer.QPS, signer.Burst = 100, 200
		if cc.PodCertificateClient, err = clientset.NewForConfig(signer); err != nil {
			return fmt.Errorf("creating the pod certificate signer's Kubernetes client: %w", err)
		}
	}

	if webhooksEnabled(cfg) {
		ctx, cancel := context.WithCancel(ctx)
		webhookDone, err := startWebhook(ctx, cfg, kubeClient, minter)
		if err != nil {
			cancel()
			return err
		}
		defer func() {
			cancel()
			<-webhookDone
		}()
	} else if cfg.ValidatingWebhookConfigurationName != "" {
		klog.FromContext(ctx).Info("ENABLE_WEBHOOKS=false: the admission webhook is not served",
			"validatingWebhookConfigurationName", cfg.ValidatingWebhookConfigurationName)
	}

	// The informers get clients of their own, whose connections wait for an API server that
	// is away, so that they see it again within a second of its return (see InformerConfig).
	informerConfig := InformerConfig(restConfig)
	informerKube, err := clientset.NewForConfig(builtInKindsConfig(informerConfig))
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	informerSpire, err := spireclientset.NewForConfig(informerConfig)
	if err != nil {
		return fmt.Errorf("creating spire.spiffe.io client: %w", err)
	}
	cc.KubeClient, cc.SpireAPIClient = kubeClient, spireAPIClient
	cc.KubeInformers, cc.SpireInformers = NewInformerFactories(informerKube, informerSpire)
	AdaptToPermissions(ctx, &cc)
	if !cfg.LeaderElection.Enabled {
		return Run(ctx, cc, opts.Workers, health)
	}
	// Standbys keep their informers warm; only the leader runs the controllers.
	return runWarmStandby(ctx, cc, opts.Workers, health)
}
