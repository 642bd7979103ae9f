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
	"flag"

	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// Options are the standalone binary's command-line flags: spire-registrar's own, and every
// flag spire-controller-manager v0.7.0 accepts, with the same meaning.
type Options struct {
	Kubeconfig string
	Master     string
	ConfigFile string
	// ExpandEnv expands $VAR in the config file (spire-controller-manager's --expand-env).
	ExpandEnv bool
	// SPIREAPISocket is spire-controller-manager's deprecated --spire-api-socket: used only
	// when the config file does not set spireServerSocketPath.
	SPIREAPISocket string
	// SPIREServerAddress and WorkloadAPISocket override spireServerAddress and
	// workloadAPISocketPath: SPIRE over TCP with SPIFFE mTLS, spire-registrar's own flags.
	SPIREServerAddress string
	WorkloadAPISocket  string

	Workers int
	DryRun  bool
	// DryRunOutput, with DryRun, is a file that receives every planned SPIRE write as a JSON
	// line.
	DryRunOutput string
	// MaxResyncShare bounds the share of time full resyncs take.
	MaxResyncShare float64
	// WriteSpread is how many concurrent RPCs a lone pod's entry writes are split into.
	WriteSpread int
	// Profiling serves Go's /debug/pprof/ handlers next to /metrics, as kube-controller-manager's
	// --profiling does; off by default because profiles show memory contents.
	Profiling bool

	// These override the config file's fields of the same meaning when set.
	MetricsBindAddress      string
	HealthProbeBindAddress  string
	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string

	// Log holds controller-runtime's zap flags, which spire-controller-manager accepts.
	Log LogFlags

	// ShowVersion asks the binary to print Version() and exit without running.
	ShowVersion bool

	// set records the flags given on the command line.
	set map[string]bool
}

// LogFlags are controller-runtime's zap logging flags. The level and encoding map to klog's
// verbosity and component-base's log format; the others only change zap and are accepted.
type LogFlags struct {
	ZapLogLevel        string
	ZapEncoder         string
	ZapDevel           bool
	ZapStacktraceLevel string
	ZapTimeEncoding    string
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Only required if out-of-cluster.")
	fs.StringVar(&o.Master, "master", "", "The address of the Kubernetes API server. Overrides any value in kubeconfig. Only required if out-of-cluster.")
	fs.StringVar(&o.ConfigFile, "config", "", "Path to the config file (spire-controller-manager's ControllerManagerConfig format). Required.")
	fs.BoolVar(&o.ExpandEnv, "expand-env", false, "Expand environment variables in the config file.")
	fs.StringVar(&o.SPIREAPISocket, "spire-api-socket", "", "The path to the SPIRE API socket (deprecated; use spireServerSocketPath in the config file, which wins when set).")
	fs.StringVar(&o.SPIREServerAddress, "spire-server-address", "", "host:port of the SPIRE server API, reached over TCP with SPIFFE mTLS instead of the admin socket. Overrides spireServerAddress (and spireServerSocketPath).")
	fs.StringVar(&o.WorkloadAPISocket, "workload-api-socket", "", "Path of the SPIRE agent's Workload API socket that spire-registrar's X509-SVID comes from, with --spire-server-address. Overrides workloadAPISocketPath.")
	fs.IntVar(&o.Workers, "workers", 10, "Number of pods synced concurrently.")
	fs.BoolVar(&o.DryRun, "dry-run", false, "Compute and log every change (create, update, delete, with the entry and the reason) without writing anything: not to SPIRE, not status, not Events.")
	fs.StringVar(&o.DryRunOutput, "dry-run-output", "", "With --dry-run, also write every planned SPIRE write to this file as JSON lines, for review.")
	fs.Float64Var(&o.MaxResyncShare, "max-resync-share", runner.DefaultMaxResyncShare, "Largest share of time full resyncs may take: the wait after a resync is stretched beyond gcInterval so that it is at least 1/share-1 times the resync's duration. 1 never stretches.")
	fs.IntVar(&o.WriteSpread, "write-spread", spire.DefaultSpread, "Most concurrent RPCs the entry writes of one pod are split into when no other write of their kind is in flight. SPIRE on PostgreSQL or MySQL writes them in parallel; 1 sends them as one RPC.")
	fs.BoolVar(&o.Profiling, "profiling", false, "Serve Go's /debug/pprof/ handlers on the metrics address (metrics.bindAddress), for CPU and heap profiles.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", "", "Address to serve /metrics on; \"0\" disables. Overrides metrics.bindAddress.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", "", "Address to serve /healthz and /readyz on; \"0\" disables. Overrides health.healthProbeBindAddress.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Run only while holding a Lease, so one of several replicas writes. Overrides leaderElection.leaderElect.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "", "Name of the Lease. Overrides leaderElection.resourceName.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the Lease (default: the pod's). Overrides leaderElection.resourceNamespace.")

	fs.StringVar(&o.Log.ZapLogLevel, "zap-log-level", "", "As in spire-controller-manager: debug, info, error, panic or an integer verbosity. Sets -v unless -v is given; overrides logLevel.")
	fs.StringVar(&o.Log.ZapEncoder, "zap-encoder", "", "As in spire-controller-manager: console or json. Overrides logEncoding.")
	fs.BoolVar(&o.Log.ZapDevel, "zap-devel", true, "Accepted for spire-controller-manager compatibility; no effect.")
	fs.StringVar(&o.Log.ZapStacktraceLevel, "zap-stacktrace-level", "", "Accepted for spire-controller-manager compatibility; no effect.")
	fs.StringVar(&o.Log.ZapTimeEncoding, "zap-time-encoding", "", "Accepted for spire-controller-manager compatibility; no effect.")

	fs.BoolVar(&o.ShowVersion, "version", false, "Print the version and VCS revision this binary was built from, and exit.")
}

// Parsed records which flags of fs were given; call it after fs.Parse.
func (o *Options) Parsed(fs *flag.FlagSet) {
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
}

// isSet reports whether the flag of that name was given.
func (o *Options) isSet(name string) bool {
	return o.set[name]
}

// override applies the flags the user set over the config file's fields.
func (o *Options) override(cfg *config.Config) {
	if o.set["metrics-bind-address"] {
		cfg.MetricsBindAddress = o.MetricsBindAddress
	}
	if o.set["health-probe-bind-address"] {
		cfg.HealthProbeBindAddress = o.HealthProbeBindAddress
	}
	cfg.MaxResyncShare = o.MaxResyncShare
	cfg.WriteSpread = o.WriteSpread
	if o.set["leader-elect"] {
		cfg.LeaderElection.Enabled = o.LeaderElect
	}
	if o.set["leader-election-id"] {
		cfg.LeaderElection.ResourceName = o.LeaderElectionID
	}
	if o.set["leader-election-namespace"] {
		cfg.LeaderElection.ResourceNamespace = o.LeaderElectionNamespace
	}
}
