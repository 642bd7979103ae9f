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

package config

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// File is the on-disk config file. Its fields, JSON names and meaning are those of
// spire-controller-manager's ControllerManagerConfig, so an existing file keeps working.
// Every field of spire-controller-manager v0.7.0 is declared. A key that matches no field
// here, case-sensitively, is ignored as spire-controller-manager ignores it, and reported
// (see Parse): it may be a field of a newer spire-controller-manager, or a typo.
type File struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Metadata is accepted because published examples carry it; it has no meaning.
	Metadata map[string]any `json:"metadata,omitempty"`

	TrustDomain           string    `json:"trustDomain"`
	ClusterName           string    `json:"clusterName"`
	ClusterDomain         string    `json:"clusterDomain"`
	SPIREServerSocketPath string    `json:"spireServerSocketPath"`
	IgnoreNamespaces      *[]string `json:"ignoreNamespaces"`
	ParentIDTemplate      string    `json:"parentIDTemplate"`
	ClassName             string    `json:"className"`
	WatchClassless        bool      `json:"watchClassless"`
	GCInterval            *Duration `json:"gcInterval"`

	EntryIDPrefix            string           `json:"entryIDPrefix"`
	EntryIDPrefixCleanup     *string          `json:"entryIDPrefixCleanup"`
	Reconcile                *ReconcileConfig `json:"reconcile"`
	StaticManifestPath       *string          `json:"staticManifestPath"`
	ExpandEnvStaticManifests bool             `json:"expandEnvStaticManifests"`
	// StaticManifestLimits caps what static mode reads (spire-registrar's own).
	StaticManifestLimits *StaticManifestLimitsConfig `json:"staticManifestLimits"`
	LogLevel             string                      `json:"logLevel"`
	LogEncoding          string                      `json:"logEncoding"`
	GRPC                 *GRPCConfig                 `json:"grpc"`

	FilterByClassName            bool                        `json:"filterByClassName"`
	ClusterSPIFFEIDLabelSelector map[string]string           `json:"clusterSPIFFEIDLabelSelector"`
	CacheNamespace               string                      `json:"cacheNamespace"`
	CacheNamespaces              map[string]*NamespaceConfig `json:"cacheNamespaces"`

	Metrics        *MetricsConfig        `json:"metrics"`
	Health         *HealthConfig         `json:"health"`
	LeaderElection *LeaderElectionConfig `json:"leaderElection"`

	ValidatingWebhookConfigurationName string         `json:"validatingWebhookConfigurationName"`
	Webhook                            *WebhookConfig `json:"webhook"`

	SyncPeriod             *Duration         `json:"syncPeriod"`
	GracefulShutdown       *Duration         `json:"gracefulShutDown"`
	Controller             *ControllerConfig `json:"controller"`
	EnableEntryRenderCache bool              `json:"enableEntryRenderCache"`
	EntryRenderCacheSize   int               `json:"entryRenderCacheSize"`

	// The fields below are spire-registrar's own additions, not spire-controller-manager's:
	// SPIRE's API over TCP with SPIFFE mTLS, with spire-registrar's X509-SVID from a SPIRE
	// agent's Workload API, instead of the server's local admin socket.

	// SPIREServerAddress is the SPIRE server API's host:port; it replaces spireServerSocketPath.
	SPIREServerAddress string `json:"spireServerAddress"`
	// WorkloadAPISocketPath is the SPIRE agent's Workload API socket; default
	// $SPIFFE_ENDPOINT_SOCKET.
	WorkloadAPISocketPath string `json:"workloadAPISocketPath"`
	// SPIREServerSPIFFEID is the SPIFFE ID the server must present; default
	// spiffe://<trustDomain>/spire/server.
	SPIREServerSPIFFEID string `json:"spireServerSPIFFEID"`

	// PodCertificates signs Kubernetes PodCertificateRequests with a downstream CA from SPIRE.
	PodCertificates *PodCertificatesConfig `json:"podCertificates"`
}

// GRPCConfig tunes the gRPC connection to the SPIRE server.
type GRPCConfig struct {
	// MaxCallRecvMsgSize is the largest message accepted from SPIRE; <= 0 keeps the default.
	MaxCallRecvMsgSize int `json:"maxCallRecvMsgSize"`
}

// NamespaceConfig narrows what is cached of one namespace's objects.
type NamespaceConfig struct {
	LabelSelectors map[string]string `json:"labelSelectors"`
	FieldSelectors map[string]string `json:"fieldSelectors"`
}

// WebhookConfig is where the admission webhook is served.
type WebhookConfig struct {
	Port    *int   `json:"port"`
	Host    string `json:"host"`
	CertDir string `json:"certDir"`
}

// ControllerConfig is controller-runtime's global controller configuration.
type ControllerConfig struct {
	GroupKindConcurrency map[string]int `json:"groupKindConcurrency"`
	CacheSyncTimeout     *Duration      `json:"cacheSyncTimeout"`
	RecoverPanic         *bool          `json:"recoverPanic"`
}

// ReconcileConfig selects which kinds are reconciled.
type ReconcileConfig struct {
	ClusterSPIFFEIDs             bool `json:"clusterSPIFFEIDs"`
	ClusterFederatedTrustDomains bool `json:"clusterFederatedTrustDomains"`
	ClusterStaticEntries         bool `json:"clusterStaticEntries"`
}

// MetricsConfig is where Prometheus metrics are served; "0" disables them.
type MetricsConfig struct {
	BindAddress string `json:"bindAddress"`
}

// HealthConfig is where health probes are served; "0" disables them.
type HealthConfig struct {
	HealthProbeBindAddress string `json:"healthProbeBindAddress"`
	ReadinessEndpointName  string `json:"readinessEndpointName"`
	LivenessEndpointName   string `json:"livenessEndpointName"`
}

// LeaderElectionConfig is component-base's leader election configuration.
type LeaderElectionConfig struct {
	LeaderElect       *bool     `json:"leaderElect"`
	LeaseDuration     *Duration `json:"leaseDuration"`
	RenewDeadline     *Duration `json:"renewDeadline"`
	RetryPeriod       *Duration `json:"retryPeriod"`
	ResourceLock      string    `json:"resourceLock"`
	ResourceName      string    `json:"resourceName"`
	ResourceNamespace string    `json:"resourceNamespace"`
}

// Duration accepts both forms found in spire-controller-manager configs: a Go duration
// string ("10s") and an integer count of nanoseconds (what its time.Duration fields decode).
// A malformed value is kept, not failed, so that validation can name the field it is in.
type Duration struct {
	time.Duration
	invalid string
}

// UnmarshalJSON decodes a duration string or an integer number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		parsed, err := time.ParseDuration(s)
		if err != nil {
			d.invalid = s
			return nil
		}
		d.Duration = parsed
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		d.invalid = string(b)
		return nil
	}
	ns, err := n.Int64()
	if err != nil {
		d.invalid = string(b)
		return nil
	}
	d.Duration = time.Duration(ns)
	return nil
}

// validate reports a malformed or non-positive duration at path.
func (d *Duration) validate(path *field.Path) *field.Error {
	switch {
	case d.invalid != "":
		return field.Invalid(path, d.invalid, `want a duration like "10s" or integer nanoseconds`)
	case d.Duration <= 0:
		return field.Invalid(path, d.String(), "must be positive")
	}
	return nil
}

// validateParsed reports a malformed duration at path; zero and negative values are allowed.
func (d *Duration) validateParsed(path *field.Path) *field.Error {
	if d.invalid != "" {
		return field.Invalid(path, d.invalid, `want a duration like "10s" or integer nanoseconds`)
	}
	return nil
}

// MarshalJSON encodes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}
