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

// Package config loads and validates spire-registrar's config file, which uses
// spire-controller-manager's ControllerManagerConfig format.
package config

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

const (
	// APIVersion and Kind are the type of the config file, as in spire-controller-manager.
	APIVersion = "spire.spiffe.io/v1alpha1"
	Kind       = "ControllerManagerConfig"

	// DefaultSPIREServerSocketPath is where the SPIRE server's admin socket is mounted in the
	// spire-server pod when spire-registrar runs as its sidecar.
	DefaultSPIREServerSocketPath = "/spire-server/api.sock"

	// SPIFFEEndpointSocketEnv is the environment variable, defined by the SPIFFE Workload
	// Endpoint specification, that names the Workload API; workloadAPISocketPath defaults to it.
	SPIFFEEndpointSocketEnv = "SPIFFE_ENDPOINT_SOCKET"

	// DefaultSPIREServerIDPath is the path of the SPIFFE ID a SPIRE server presents by default,
	// spiffe://<trust domain>/spire/server.
	DefaultSPIREServerIDPath = "/spire/server"

	// DefaultParentIDTemplate links a pod's entry to the k8s_psat agent on its node.
	DefaultParentIDTemplate = "spiffe://{{ .TrustDomain }}/spire/agent/k8s_psat/{{ .ClusterName }}/{{ .NodeMeta.UID }}"

	// DefaultGCInterval is how often SPIRE is listed in full to repair out-of-band changes and
	// remove orphans. Events are handled incrementally, so unlike spire-controller-manager's
	// 10s this only bounds repair time; a full list of 300k entries every few minutes is a
	// load a SPIRE server bears.
	DefaultGCInterval = 5 * time.Minute

	// DisabledAddress turns a server off, as in spire-controller-manager.
	DisabledAddress = "0"

	// Leader election defaults are client-go's usual ones.
	DefaultLeaseName     = "spire-registrar"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second

	// DefaultGracefulShutdownTimeout is how long the controllers get to stop after a signal,
	// controller-runtime's default for gracefulShutDown.
	DefaultGracefulShutdownTimeout = 30 * time.Second

	// DefaultWebhookPort is where the admission webhook is served, as in
	// spire-controller-manager.
	DefaultWebhookPort = 9443

	// ClassNameLabel is the label filterByClassName selects ClusterSPIFFEIDs by, as
	// spire-controller-manager and its Helm chart name it.
	ClassNameLabel = "spire.spiffe.io/class-name"
)

// Log levels and encodings of the logLevel and logEncoding fields.
const (
	LogLevelDebug = "debug"
	LogLevelInfo  = "info"
	LogLevelWarn  = "warn"
	LogLevelError = "error"

	LogEncodingConsole = "console"
	LogEncodingJSON    = "json"
)

// DefaultIgnoreNamespaces are the namespaces whose pods never get entries when the config
// does not say otherwise: the system namespaces and SPIRE's own.
var DefaultIgnoreNamespaces = []string{"kube-system", "kube-public", "spire-system"}

// Config is the validated configuration the controllers run with.
type Config struct {
	TrustDomain           spiffeid.TrustDomain
	ClusterName           string
	ClusterDomain         string
	SPIREServerSocketPath string // empty when SPIREServerAddress is set

	// SPIREServerAddress, when set, is the host:port of the SPIRE server API, reached over TCP
	// with SPIFFE mTLS: spire-registrar's own X509-SVID comes from the SPIRE agent's Workload
	// API at WorkloadAPIAddress, and the server must present SPIREServerID.
	SPIREServerAddress string
	// WorkloadAPIAddress is the agent's Workload API as go-spiffe takes it, e.g.
	// unix:///run/spire/agent-sockets/spire-agent.sock. Set only with SPIREServerAddress.
	WorkloadAPIAddress string
	// SPIREServerID is the SPIFFE ID the server must present. Set only with
	// SPIREServerAddress.
	SPIREServerID spiffeid.ID

	// IgnoreNamespaces are the configured patterns; IsNamespaceIgnored applies them.
	IgnoreNamespaces []string
	ParentIDTemplate string
	ClassName        string
	WatchClassless   bool
	GCInterval       time.Duration
	// MaxResyncShare bounds the share of time full resyncs take (spire-registrar's
	// --max-resync-share; 0 means the default).
	MaxResyncShare float64
	// WriteSpread is the most concurrent RPCs one pod's entry writes are split into
	// (spire-registrar's --write-spread; 0 means spire.DefaultSpread).
	WriteSpread int

	// MetricsBindAddress and HealthProbeBindAddress are where /metrics and the health
	// probes are served; "0" (the default) disables them.
	MetricsBindAddress     string
	HealthProbeBindAddress string
	ReadinessEndpointName  string
	LivenessEndpointName   string

	LeaderElection LeaderElection

	// EntryIDPrefix and EntryIDPrefixCleanup share a SPIRE server between owners; see the
	// entry controller's Options.
	EntryIDPrefix        string
	EntryIDPrefixCleanup *string

	// Reconcile says which kinds are reconciled; all by default.
	Reconcile Reconcile

	// PodCertificates is the pod certificate signer's section; off by default.
	PodCertificates PodCertificates

	// StaticManifestPath, when set, runs spire-registrar without Kubernetes: the
	// ClusterStaticEntry and ClusterFederatedTrustDomain manifests of this directory are the
	// declared state. ExpandEnvStaticManifests expands $VAR in them first.
	StaticManifestPath       string
	ExpandEnvStaticManifests bool
	// StaticManifestMaxFileSize and StaticManifestMaxTotalSize cap the bytes of one manifest
	// file and of all of them (staticManifestLimits); 0 keeps static's defaults.
	StaticManifestMaxFileSize  int64
	StaticManifestMaxTotalSize int64

	// LogLevel is one of the LogLevel constants and LogEncoding one of the LogEncoding ones.
	LogLevel    string
	LogEncoding string

	// GRPCMaxCallRecvMsgSize is the largest message accepted from SPIRE; 0 keeps the client's
	// default.
	GRPCMaxCallRecvMsgSize int

	// ClusterSPIFFEIDLabels, when not empty, restricts the ClusterSPIFFEIDs watched to those
	// carrying all these labels (clusterSPIFFEIDLabelSelector, plus the class label when
	// filterByClassName is set).
	ClusterSPIFFEIDLabels map[string]string

	// CacheNamespaces, when not empty, restricts the namespaced objects watched (pods,
	// EndpointSlices) to these namespaces, each optionally narrowed by selectors. Pods of
	// other namespaces are treated as ignored.
	CacheNamespaces map[string]NamespaceCache

	// GracefulShutdownTimeout is how long the controllers get to stop after a signal before
	// the process exits with an error; 0 does not wait, a negative value waits for ever.
	GracefulShutdownTimeout time.Duration

	// CacheSyncTimeout, when positive, is how long to wait for the informers' caches to fill
	// before giving up with an error; 0 waits for ever.
	CacheSyncTimeout time.Duration

	// ValidatingWebhookConfigurationName and Webhook are stored for the admission webhook.
	ValidatingWebhookConfigurationName string
	Webhook                            Webhook

	// Unused are fields that were set but have no meaning here, each with the reason; the
	// binary logs them once at start.
	Unused []UnusedField
	// Unknown are fields of the file that its format does not declare. They are ignored, as
	// spire-controller-manager ignores them; the binary warns of each once at start.
	Unknown []UnknownField
	// Duplicates are the paths of fields the file sets more than once in one mapping. The
	// last value is used, as in spire-controller-manager; the binary warns of each once at
	// start.
	Duplicates []string

	ignoreNamespaces []*regexp.Regexp
	// socketPathDefaulted is set when the file does not name spireServerSocketPath.
	socketPathDefaulted bool
	// spireConnection is what the file says on how SPIRE is reached, for the flags.
	spireConnection spireConnectionFields
}

// NamespaceCache narrows the objects watched in one namespace. Empty selectors select all.
type NamespaceCache struct {
	LabelSelector string
	FieldSelector string
}

// Webhook is where the admission webhook is to be served.
type Webhook struct {
	Port    int
	Host    string
	CertDir string
}

// UnusedField is a config field that is accepted but has no effect.
type UnusedField struct {
	Field  string
	Reason string
}

// Reconcile selects the kinds the controllers reconcile. The entries and relationships of a
// kind that is off are left alone, not deleted.
type Reconcile struct {
	ClusterSPIFFEIDs             bool
	ClusterStaticEntries         bool
	ClusterFederatedTrustDomains bool
}

// LeaderElection configures leader election on a coordination.k8s.io Lease.
type LeaderElection struct {
	Enabled           bool
	ResourceName      string
	ResourceNamespace string
	LeaseDuration     time.Duration
	RenewDeadline     time.Duration
	RetryPeriod       time.Duration
}

// IsNamespaceIgnored reports whether a namespace matches one of the ignoreNamespaces
// patterns, or lies outside cacheNamespaces when those are set. As in
// spire-controller-manager, a pattern matches anywhere in the name (an unanchored search):
// "spire" ignores spire-server and my-spire; "^kube-" ignores only names that start so.
func (c *Config) IsNamespaceIgnored(namespace string) bool {
	if len(c.CacheNamespaces) > 0 {
		if _, cached := c.CacheNamespaces[namespace]; !cached {
			return true
		}
	}
	for _, re := range c.ignoreNamespaces {
		if re.MatchString(namespace) {
			return true
		}
	}
	return false
}

// Class is the className of the resources a controller acts on.
type Class struct {
	// Name is the class handled. Empty means classless resources only: resources of every
	// other class belong to other installs sharing the cluster.
	Name string
	// WatchClassless makes a controller with a Name handle classless resources too.
	WatchClassless bool
}

// Matches reports whether a resource of the given className is the controller's to act on,
// by spire-controller-manager's rule: resources of the class, and classless ones when the
// class is empty or classless resources are watched.
func (c Class) Matches(className string) bool {
	return className == c.Name || (className == "" && c.WatchClassless)
}

// Class is the class of the resources this controller acts on (className, watchClassless).
func (c *Config) Class() Class {
	return Class{Name: c.ClassName, WatchClassless: c.WatchClassless}
}

// UseSPIREAPISocketFlag applies spire-controller-manager's deprecated --spire-api-socket flag
// as it does: the flag is used only when the file does not set spireServerSocketPath (nor
// spireServerAddress). It reports whether the flag was used.
func (c *Config) UseSPIREAPISocketFlag(path string) bool {
	if path == "" || !c.socketPathDefaulted || c.SPIREServerAddress != "" {
		return false
	}
	c.SPIREServerSocketPath, c.socketPathDefaulted = path, false
	return true
}

// Load reads, decodes and validates the config file at path. With expandEnv, $VAR and ${VAR}
// are first replaced by the environment's values (unset ones by nothing), as
// spire-controller-manager's --expand-env does.
func Load(path string, expandEnv bool) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	if expandEnv {
		data = []byte(os.ExpandEnv(string(data)))
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes and validates a config file's content as spire-controller-manager decodes
// it. A field the format does not declare is not an error: it is returned in Config.Unknown,
// with the declared field it was probably meant to be when one is close, so that a file
// written for a newer spire-controller-manager still starts. A field set twice keeps its last
// value and is returned in Config.Duplicates. A value of the wrong type or an invalid one is
// an error naming its field; when the file also has unknown fields, the error names them too,
// as a misspelt field often is why a required one is missing.
func Parse(data []byte) (*Config, error) {
	d, err := decode(data)
	if err != nil {
		return nil, err
	}
	cfg, err := d.file.Validate()
	if err == nil && cfg.Reconcile == (Reconcile{}) {
		err = misspeltReconcile(d.unknown)
	}
	if err != nil {
		if len(d.unknown) > 0 {
			names := make([]string, len(d.unknown))
			for i, u := range d.unknown {
				names[i] = u.String()
			}
			err = fmt.Errorf("%w; unknown fields, ignored: %s", err, strings.Join(names, ", "))
		}
		return nil, err
	}
	cfg.Unknown, cfg.Duplicates = d.unknown, d.duplicates
	return cfg, nil
}

// misspeltReconcile refuses a reconcile block that enables nothing because a kind in it is
// misspelt: doing nothing on a typo would leave every entry as it is until someone notices.
func misspeltReconcile(unknown []UnknownField) error {
	for _, u := range unknown {
		if strings.HasPrefix(u.Field, "reconcile.") {
			return fmt.Errorf("invalid config: reconcile: enables no kind, and %s is not a kind it knows", u.Field)
		}
	}
	return nil
}
