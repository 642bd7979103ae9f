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
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

const minimal = `
apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: demo
`

// configOptions compare parsed Configs by their exported fields; the unexported ones are
// derived from those (compiled patterns) or only steer flag handling.
var configOptions = cmp.Options{
	cmpopts.IgnoreUnexported(Config{}),
	cmpopts.EquateComparable(spiffeid.TrustDomain{}, spiffeid.ID{}),
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := cfg.TrustDomain.String(); got != "example.org" {
		t.Errorf("TrustDomain = %q", got)
	}
	if cfg.SPIREServerSocketPath != DefaultSPIREServerSocketPath {
		t.Errorf("SPIREServerSocketPath = %q", cfg.SPIREServerSocketPath)
	}
	if cfg.ParentIDTemplate != DefaultParentIDTemplate {
		t.Errorf("ParentIDTemplate = %q", cfg.ParentIDTemplate)
	}
	if cfg.GCInterval != DefaultGCInterval {
		t.Errorf("GCInterval = %v", cfg.GCInterval)
	}
	for _, ns := range []string{"kube-system", "kube-public", "spire-system"} {
		if !cfg.IsNamespaceIgnored(ns) {
			t.Errorf("default config does not ignore %s", ns)
		}
	}
	if cfg.IsNamespaceIgnored("default") {
		t.Errorf("default config ignores the default namespace")
	}
}

func TestParseFullFile(t *testing.T) {
	cfg, err := Parse([]byte(`
apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
metadata:
  name: config
trustDomain: prod.example.org
clusterName: east
clusterDomain: cluster.local
spireServerSocketPath: /run/spire/api.sock
ignoreNamespaces: ["kube-.*", "istio-system", "^spire$"]
parentIDTemplate: "spiffe://{{ .TrustDomain }}/k8s-node/{{ .NodeMeta.Name }}"
className: blue
watchClassless: true
gcInterval: 30s
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	defaults, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	// Every field the file sets is honoured; the others keep their defaults.
	want := *defaults
	want.TrustDomain = spiffeid.RequireTrustDomainFromString("prod.example.org")
	want.ClusterName = "east"
	want.ClusterDomain = "cluster.local"
	want.SPIREServerSocketPath = "/run/spire/api.sock"
	want.IgnoreNamespaces = []string{"kube-.*", "istio-system", "^spire$"}
	want.ParentIDTemplate = "spiffe://{{ .TrustDomain }}/k8s-node/{{ .NodeMeta.Name }}"
	want.ClassName = "blue"
	want.WatchClassless = true
	want.GCInterval = 30 * time.Second
	if diff := cmp.Diff(&want, cfg, configOptions); diff != "" {
		t.Errorf("fields not honoured (-want +got):\n%s", diff)
	}
	cases := map[string]bool{
		"kube-system": true, "kube-node-lease": true, "istio-system": true,
		// Unanchored search, as spire-controller-manager matches.
		"my-kube-app": true, "istio-system-2": true, "spire": true,
		"spire-server": false, "default": false,
	}
	for ns, want := range cases {
		if got := cfg.IsNamespaceIgnored(ns); got != want {
			t.Errorf("IsNamespaceIgnored(%q) = %v, want %v (patterns are searched, unanchored)", ns, got, want)
		}
	}
}

func TestServingAndLeaderElection(t *testing.T) {
	cfg, err := Parse([]byte(minimal + `
metrics:
  bindAddress: 127.0.0.1:8082
health:
  healthProbeBindAddress: 0.0.0.0:8083
  readinessEndpointName: ready
leaderElection:
  leaderElect: true
  resourceName: 98c9c988.spiffe.io
  resourceNamespace: spire-system
  leaseDuration: 30s
  renewDeadline: 20000000000
  retryPeriod: 5s
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	plain, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := *plain
	want.LeaderElection = LeaderElection{Enabled: true, ResourceName: "98c9c988.spiffe.io", ResourceNamespace: "spire-system",
		LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 5 * time.Second}
	want.MetricsBindAddress = "127.0.0.1:8082"
	want.HealthProbeBindAddress = "0.0.0.0:8083"
	want.ReadinessEndpointName = "ready"
	if diff := cmp.Diff(&want, cfg, configOptions); diff != "" {
		t.Errorf("serving and leader election (-want +got):\n%s", diff)
	}
	if plain.LeaderElection.Enabled || plain.MetricsBindAddress != DisabledAddress || plain.HealthProbeBindAddress != DisabledAddress ||
		plain.LivenessEndpointName != "healthz" {
		t.Errorf("defaults: %+v", plain)
	}
}

func TestReconcileToggles(t *testing.T) {
	all, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if all.Reconcile != (Reconcile{ClusterSPIFFEIDs: true, ClusterStaticEntries: true, ClusterFederatedTrustDomains: true}) {
		t.Errorf("default reconcile = %+v, want every kind", all.Reconcile)
	}
	some, err := Parse([]byte(minimal + "reconcile:\n  clusterFederatedTrustDomains: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if some.Reconcile != (Reconcile{ClusterFederatedTrustDomains: true}) {
		t.Errorf("reconcile = %+v, want only what the block enables", some.Reconcile)
	}
}

func TestDurationForms(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"10s", 10 * time.Second},
		{"\"1m30s\"", 90 * time.Second},
		{"10000000000", 10 * time.Second},
	} {
		t.Run(tc.value, func(t *testing.T) {
			cfg, err := Parse([]byte(minimal + "gcInterval: " + tc.value + "\n"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if cfg.GCInterval != tc.want {
				t.Errorf("GCInterval = %v, want %v", cfg.GCInterval, tc.want)
			}
		})
	}
}

func TestEmptyIgnoreNamespacesIgnoresNothing(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "ignoreNamespaces: []\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if cfg.IsNamespaceIgnored("kube-system") {
		t.Errorf("an explicit empty list must not fall back to the defaults")
	}
}

func TestClassMatches(t *testing.T) {
	for _, tc := range []struct {
		class, watchClassless, object string
		want                          bool
	}{
		{"", "false", "", true},
		// Another install's resources, as spire-controller-manager leaves them.
		{"", "false", "other", false},
		{"", "true", "other", false},
		{"blue", "false", "blue", true},
		{"blue", "false", "", false},
		{"blue", "true", "", true},
		{"blue", "true", "red", false},
	} {
		cfg := &Config{ClassName: tc.class, WatchClassless: tc.watchClassless == "true"}
		if got := cfg.Class().Matches(tc.object); got != tc.want {
			t.Errorf("class %q watchClassless %s: Class().Matches(%q) = %v, want %v",
				tc.class, tc.watchClassless, tc.object, got, tc.want)
		}
	}
}

func TestStaticMode(t *testing.T) {
	cfg, err := Parse([]byte("trustDomain: example.org\nstaticManifestPath: /etc/spire/manifests\nexpandEnvStaticManifests: true\n"))
	if err != nil {
		t.Fatalf("static mode needs no clusterName: %v", err)
	}
	if cfg.StaticManifestPath != "/etc/spire/manifests" || !cfg.ExpandEnvStaticManifests {
		t.Errorf("static settings = %q %v", cfg.StaticManifestPath, cfg.ExpandEnvStaticManifests)
	}
	// Static mode reconciles what files can declare; ClusterSPIFFEIDs select pods.
	if want := (Reconcile{ClusterStaticEntries: true, ClusterFederatedTrustDomains: true}); cfg.Reconcile != want {
		t.Errorf("Reconcile = %+v, want %+v", cfg.Reconcile, want)
	}
	if cfg.StaticManifestMaxFileSize != 0 || cfg.StaticManifestMaxTotalSize != 0 {
		t.Errorf("static limits without staticManifestLimits = %d, %d, want 0 (static's defaults)", cfg.StaticManifestMaxFileSize, cfg.StaticManifestMaxTotalSize)
	}
	limited, err := Parse([]byte("trustDomain: example.org\nstaticManifestPath: /m\nstaticManifestLimits: {maxFileSize: 1Mi, maxTotalSize: 16777216}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if limited.StaticManifestMaxFileSize != 1<<20 || limited.StaticManifestMaxTotalSize != 16<<20 {
		t.Errorf("staticManifestLimits = %d, %d, want 1Mi, 16Mi", limited.StaticManifestMaxFileSize, limited.StaticManifestMaxTotalSize)
	}
	only, err := Parse([]byte("trustDomain: example.org\nstaticManifestPath: /m\nreconcile: {clusterFederatedTrustDomains: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Reconcile{ClusterFederatedTrustDomains: true}); only.Reconcile != want {
		t.Errorf("Reconcile = %+v, want %+v", only.Reconcile, want)
	}
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, field string
	}{
		{"missing trust domain", "clusterName: demo\n", "trustDomain"},
		{"bad trust domain", "trustDomain: Example.ORG!\nclusterName: demo\n", "trustDomain"},
		{"trust domain as URI", "trustDomain: spiffe://example.org\nclusterName: demo\n", "trustDomain"},
		{"missing cluster name", "trustDomain: example.org\n", "clusterName"},
		{"wrong kind", "kind: Other\ntrustDomain: example.org\nclusterName: demo\n", "kind"},
		{"wrong apiVersion", "apiVersion: v1\ntrustDomain: example.org\nclusterName: demo\n", "apiVersion"},
		{"zero gcInterval", minimal + "gcInterval: 0s\n", "gcInterval"},
		{"negative gcInterval", minimal + "gcInterval: -5s\n", "gcInterval"},
		{"bad gcInterval", minimal + "gcInterval: soon\n", "gcInterval"},
		{"bad regex", minimal + "ignoreNamespaces: [\"(\"]\n", "ignoreNamespaces[0]"},
		{"bad parent template", minimal + "parentIDTemplate: \"{{ .Foo \"\n", "parentIDTemplate"},
		{"dotted cluster domain", minimal + "clusterDomain: .cluster.local\n", "clusterDomain"},
		{"bad metrics address", minimal + "metrics:\n  bindAddress: nowhere\n", "metrics.bindAddress"},
		{"bad health address", minimal + "health:\n  healthProbeBindAddress: \"8083\"\n", "health.healthProbeBindAddress"},
		{"health address with a path", minimal + "health:\n  healthProbeBindAddress: localhost:8083/healthz\n", "health.healthProbeBindAddress"},
		{"metrics port out of range", minimal + "metrics:\n  bindAddress: \":70000\"\n", "metrics.bindAddress"},
		{"bad readiness name", minimal + "health:\n  readinessEndpointName: a/b\n", "health.readinessEndpointName"},
		{"config map lock", minimal + "leaderElection:\n  resourceLock: configmaps\n", "leaderElection.resourceLock"},
		{"renew after lease", minimal + "leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n", "leaderElection.renewDeadline"},
		{"bad retry period", minimal + "leaderElection:\n  retryPeriod: often\n", "leaderElection.retryPeriod"},
		{"prefix with a dot", minimal + "entryIDPrefix: a.b\n", "entryIDPrefix"},
		{"cleanup equal to prefix", minimal + "entryIDPrefix: a\nentryIDPrefixCleanup: a\n", "entryIDPrefixCleanup"},
		{"cleanup of unprefixed without prefix", minimal + "entryIDPrefixCleanup: \"\"\n", "entryIDPrefixCleanup"},
		{"reconcile misspelt kind", minimal + "reconcile: {clusterSPIFFEID: true}\n", "did you mean reconcile.clusterSPIFFEIDs?"},
		{"empty staticManifestPath", minimal + "staticManifestPath: \"\"\n", "staticManifestPath"},
		{"expandEnv without static mode", minimal + "expandEnvStaticManifests: true\n", "expandEnvStaticManifests"},
		{"ClusterSPIFFEIDs in static mode", minimal + "staticManifestPath: /m\nreconcile: {clusterSPIFFEIDs: true, clusterStaticEntries: true}\n",
			"reconcile.clusterSPIFFEIDs"},
		{"leader election in static mode", minimal + "staticManifestPath: /m\nleaderElection: {leaderElect: true}\n", "leaderElection.leaderElect"},
		{"static limits without static mode", minimal + "staticManifestLimits: {maxFileSize: 1Mi}\n", "staticManifestLimits"},
		{"zero static file cap", minimal + "staticManifestPath: /m\nstaticManifestLimits: {maxFileSize: 0}\n", "staticManifestLimits.maxFileSize"},
		{"fractional static total cap", minimal + "staticManifestPath: /m\nstaticManifestLimits: {maxTotalSize: 100m}\n", "staticManifestLimits.maxTotalSize"},
		{"static file cap over the total", minimal + "staticManifestPath: /m\nstaticManifestLimits: {maxFileSize: 2Mi, maxTotalSize: 1Mi}\n", "staticManifestLimits.maxFileSize"},
		{"static cap not a size", minimal + "staticManifestPath: /m\nstaticManifestLimits: {maxFileSize: big}\n", "staticManifestLimits.maxFileSize"},
		{"unknown log level", minimal + "logLevel: verbose\n", "logLevel"},
		{"unknown log encoding", minimal + "logEncoding: logfmt\n", "logEncoding"},
		{"filterByClassName without className", minimal + "filterByClassName: true\n", "className"},
		{"bad label selector key", minimal + "clusterSPIFFEIDLabelSelector: {\"a b\": x}\n", "clusterSPIFFEIDLabelSelector"},
		{"bad label selector value", minimal + "clusterSPIFFEIDLabelSelector: {team: \"a b\"}\n", "clusterSPIFFEIDLabelSelector"},
		{"both cache namespace fields", minimal + "cacheNamespace: a\ncacheNamespaces: {b: {}}\n", "cacheNamespace"},
		{"bad namespace label selector", minimal + "cacheNamespaces: {a: {labelSelectors: {\"-x\": v}}}\n", "cacheNamespaces[a].labelSelectors"},
		{"different selectors per namespace", minimal + "cacheNamespaces: {a: {labelSelectors: {x: v}}, b: {}}\n", "cacheNamespaces[b]"},
		{"webhook port zero", minimal + "webhook: {port: 0}\n", "webhook.port"},
		{"webhook port too large", minimal + "webhook: {port: 70000}\n", "webhook.port"},
		{"bad gracefulShutDown", minimal + "gracefulShutDown: soon\n", "gracefulShutDown"},
		{"bad syncPeriod", minimal + "syncPeriod: often\n", "syncPeriod"},
		{"zero cacheSyncTimeout", minimal + "controller: {cacheSyncTimeout: 0}\n", "controller.cacheSyncTimeout"},
		{"grpc as a number", minimal + "grpc: 4\n", "grpc"},
		{"signer name without a path", minimal + "podCertificates: {enabled: true, signerName: example.com}\n", "podCertificates.signerName"},
		{"signer name of one label", minimal + "podCertificates: {signerName: spire/x509}\n", "podCertificates.signerName"},
		{"signer name of two slashes", minimal + "podCertificates: {signerName: example.com/a/b}\n", "podCertificates.signerName"},
		{"kubernetes.io signer name", minimal + "podCertificates: {signerName: kubernetes.io/x509-svid}\n", "podCertificates.signerName"},
		{"CA TTL under 2h", minimal + "podCertificates: {caTTL: 1h}\n", "podCertificates.caTTL"},
		{"bad failPendingAfter", minimal + "podCertificates: {failPendingAfter: later}\n", "podCertificates.failPendingAfter"},
		{"pod certificate default TTL under 1h", minimal + "podCertificates: {defaultTTL: 30m}\n", "podCertificates.defaultTTL"},
		{"bad pod certificate max TTL", minimal + "podCertificates: {maxTTL: long}\n", "podCertificates.maxTTL"},
		{"pod certificate max TTL under 1h", minimal + "podCertificates: {maxTTL: 59m}\n", "podCertificates.maxTTL"},
		{"pod certificate default TTL over the max", minimal + "podCertificates: {defaultTTL: 3h, maxTTL: 2h}\n", "podCertificates.defaultTTL"},
		{"negative waitForIdentity", minimal + "podCertificates: {waitForIdentity: -1s}\n", "podCertificates.waitForIdentity"},
		{"waitForIdentity past the request cleaner", minimal + "podCertificates: {waitForIdentity: 15m}\n", "podCertificates.waitForIdentity"},
		{"pod certificates in static mode", minimal + "staticManifestPath: /m\npodCertificates: {enabled: true}\n", "podCertificates.enabled"},
		{"federated signer name of no path", minimal + "podCertificates: {federatedSignerName: example.com}\n", "podCertificates.federatedSignerName"},
		{"federated signer name the signer name", minimal + "podCertificates: {signerName: example.com/svid, federatedSignerName: example.com/svid}\n", "podCertificates.federatedSignerName"},
		{"federated signer name the default signer name", minimal + "podCertificates: {federatedSignerName: spire.spiffe.io/x509-svid}\n", "podCertificates.federatedSignerName"},
		{"not yaml", "trustDomain: [\n", "decoding"},
		{"not a mapping", "- trustDomain: example.org\n", "mapping"},

		// A value of the wrong type stops start-up even where unknown fields do not.
		{"gcInterval as a list", minimal + "gcInterval: [1]\n", "gcInterval"},
		{"leaderElection as a number", minimal + "leaderElection: 3\n", "leaderElection"},
		{"className as a mapping", minimal + "className: {}\n", "className"},
		{"leaderElect as a string", minimal + "leaderElection: {leaderElect: maybe}\n", "leaderElection.leaderElect"},
		{"webhook port as a fraction", minimal + "webhook: {port: 1.5}\n", "webhook.port"},
		// YAML 1.1 reads an unquoted y as true; like spire-controller-manager, a string field
		// does not take it.
		{"unquoted boolean label", minimal + "cacheNamespaces: {a: {labelSelectors: {x: y}}}\n", "quote"},
		{"wrong type next to an unknown field", minimal + "foo: 1\nwatchClassless: sometimes\n", "watchClassless"},

		// When a file is invalid, its unknown fields are named too: a misspelt field is often
		// why a required one is missing.
		{"misspelt required field", "trustDomain: example.org\nclustername: demo\n", "clustername (did you mean clusterName?)"},
		{"required field in the wrong case", "TrustDomain: example.org\nclusterName: demo\n", "TrustDomain (did you mean trustDomain?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse accepted an invalid config")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

// chartConfig is the config file the official Helm chart (spiffe/helm-charts-hardened)
// renders for spire-controller-manager 0.7.0, with the optional fields set.
const chartConfig = `
apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
metadata:
  name: spire-controller-manager
  namespace: spire-server
  labels: {app.kubernetes.io/name: server}
metrics:
  bindAddress: 0.0.0.0:8082
health:
  healthProbeBindAddress: 0.0.0.0:8083
gcInterval: 10000000000
logLevel: info
logEncoding: console
leaderElection:
  leaderElect: true
  resourceName: 98c9c988.spiffe.io
  resourceNamespace: spire-server
  leaseDuration: 15s
  renewDeadline: 10s
  retryPeriod: 2s
validatingWebhookConfigurationName: spire-server-spire-controller-manager-webhook
entryIDPrefix: example-cluster
clusterName: example-cluster
trustDomain: example.org
ignoreNamespaces: [kube-system, kube-public, local-path-storage, "openshift-.*", "ibm-.*"]
spireServerSocketPath: /tmp/spire-server/private/api.sock
className: spire-server-spire
watchClassless: false
filterByClassName: true
parentIDTemplate: "spiffe://{{ .TrustDomain }}/spire/agent/k8s_psat/{{ .ClusterName }}/{{ .NodeMeta.UID }}"
reconcile:
  clusterSPIFFEIDs: true
  clusterFederatedTrustDomains: true
  clusterStaticEntries: true
`

// TestEveryControllerManagerFieldIsAccepted parses the chart's config plus every other field
// of spire-controller-manager 0.7.0's ControllerManagerConfig and checks what each becomes.
func TestEveryControllerManagerFieldIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		extra  string
		check  func(*Config) any
		want   any
		unused []string
	}{
		{name: "chart defaults", check: func(c *Config) any {
			return []any{c.LogLevel, c.LogEncoding, c.ClusterSPIFFEIDLabels, c.ValidatingWebhookConfigurationName, c.Webhook, c.GracefulShutdownTimeout, c.CacheSyncTimeout}
		}, want: []any{"info", "console", map[string]string{ClassNameLabel: "spire-server-spire"},
			"spire-server-spire-controller-manager-webhook", Webhook{Port: DefaultWebhookPort}, DefaultGracefulShutdownTimeout, time.Duration(0)}},
		{name: "log level and encoding", extra: "logLevel: DEBUG\nlogEncoding: json\n",
			check: func(c *Config) any { return []string{c.LogLevel, c.LogEncoding} }, want: []string{"debug", "json"}},
		{name: "label selector merged with the class label", extra: "clusterSPIFFEIDLabelSelector:\n  spire.spiffe.io/child-server: \"true\"\n  spire.spiffe.io/class-name: other\n",
			check: func(c *Config) any { return c.ClusterSPIFFEIDLabels },
			want:  map[string]string{"spire.spiffe.io/child-server": "true", ClassNameLabel: "spire-server-spire"}},
		{name: "grpc", extra: "grpc: {maxCallRecvMsgSize: 67108864}\n",
			check: func(c *Config) any { return c.GRPCMaxCallRecvMsgSize }, want: 64 << 20},
		{name: "non-positive grpc size keeps the default", extra: "grpc: {maxCallRecvMsgSize: -1}\n",
			check: func(c *Config) any { return c.GRPCMaxCallRecvMsgSize }, want: 0},
		{name: "one cache namespace", extra: "cacheNamespace: apps\n",
			check: func(c *Config) any { return c.CacheNamespaces }, want: map[string]NamespaceCache{"apps": {}}},
		{name: "cache namespaces with selectors", extra: "cacheNamespaces:\n  apps:\n    labelSelectors: {spiffe: \"on\"}\n    fieldSelectors: {spec.nodeName: n1}\n",
			check: func(c *Config) any { return c.CacheNamespaces },
			want:  map[string]NamespaceCache{"apps": {LabelSelector: "spiffe=on", FieldSelector: "spec.nodeName=n1"}}},
		{name: "several cache namespaces", extra: "cacheNamespaces: {apps: {}, web: null}\n",
			check: func(c *Config) any { return c.CacheNamespaces }, want: map[string]NamespaceCache{"apps": {}, "web": {}}},
		{name: "graceful shutdown", extra: "gracefulShutDown: 45s\n",
			check: func(c *Config) any { return c.GracefulShutdownTimeout }, want: 45 * time.Second},
		{name: "no graceful shutdown", extra: "gracefulShutDown: 0s\n",
			check: func(c *Config) any { return c.GracefulShutdownTimeout }, want: time.Duration(0)},
		{name: "unbounded graceful shutdown", extra: "gracefulShutDown: -1s\n",
			check: func(c *Config) any { return c.GracefulShutdownTimeout }, want: -time.Second},
		{name: "webhook", extra: "webhook: {port: 10443, host: 0.0.0.0, certDir: /certs}\n",
			check: func(c *Config) any { return c.Webhook }, want: Webhook{Port: 10443, Host: "0.0.0.0", CertDir: "/certs"},
			unused: []string{"webhook.certDir"}},
		{name: "cache sync timeout in nanoseconds", extra: "controller: {cacheSyncTimeout: 120000000000}\n",
			check: func(c *Config) any { return c.CacheSyncTimeout }, want: 2 * time.Minute},
		{name: "a reconcile block that enables nothing", extra: "reconcile: {clusterSPIFFEIDs: false, clusterStaticEntries: false, clusterFederatedTrustDomains: false}\n",
			check: func(c *Config) any { return c.Reconcile }, want: Reconcile{}, unused: []string{"reconcile"}},
		{name: "fields with no meaning here", extra: "syncPeriod: 10h\nenableEntryRenderCache: true\nentryRenderCacheSize: 1000\n" +
			"controller:\n  groupKindConcurrency: {ClusterSPIFFEID.spire.spiffe.io: 5}\n  recoverPanic: true\n",
			check: func(c *Config) any { return c.CacheSyncTimeout }, want: time.Duration(0),
			unused: []string{"syncPeriod", "enableEntryRenderCache, entryRenderCacheSize", "controller.groupKindConcurrency", "controller.recoverPanic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := chartConfig
			if strings.Contains(tc.extra, "logLevel") {
				file = strings.NewReplacer("logLevel: info\n", "", "logEncoding: console\n", "").Replace(file)
			}
			cfg, err := Parse([]byte(file + tc.extra))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, tc.check(cfg)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var unused []string
			for _, u := range cfg.Unused {
				unused = append(unused, u.Field)
			}
			if diff := cmp.Diff(tc.unused, unused); diff != "" {
				t.Errorf("unused fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCacheNamespacesIgnoreOtherNamespaces(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "ignoreNamespaces: [apps-canary]\ncacheNamespaces: {apps: {}, apps-canary: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]bool{"apps": false, "apps-canary": true, "default": true, "kube-system": true} {
		if got := cfg.IsNamespaceIgnored(ns); got != want {
			t.Errorf("IsNamespaceIgnored(%q) = %v, want %v", ns, got, want)
		}
	}
}

func TestSPIREAPISocketFlagOnlyFillsAnUnsetPath(t *testing.T) {
	unset, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if !unset.UseSPIREAPISocketFlag("/flag.sock") || unset.SPIREServerSocketPath != "/flag.sock" {
		t.Errorf("flag not used when the file sets no path: %q", unset.SPIREServerSocketPath)
	}
	set, err := Parse([]byte(minimal + "spireServerSocketPath: /file.sock\n"))
	if err != nil {
		t.Fatal(err)
	}
	if set.UseSPIREAPISocketFlag("/flag.sock") || set.SPIREServerSocketPath != "/file.sock" {
		t.Errorf("flag overrode the file's path: %q", set.SPIREServerSocketPath)
	}
}

func TestLoadExpandsEnvironmentOnlyWhenAsked(t *testing.T) {
	t.Setenv("TEST_CLUSTER", "east")
	path := t.TempDir() + "/config.yaml"
	if err := os.WriteFile(path, []byte("trustDomain: example.org\nclusterName: ${TEST_CLUSTER}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for expand, want := range map[bool]string{true: "east", false: "${TEST_CLUSTER}"} {
		cfg, err := Load(path, expand)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ClusterName != want {
			t.Errorf("expandEnv %v: clusterName = %q, want %q", expand, cfg.ClusterName, want)
		}
	}
}

func TestPodCertificates(t *testing.T) {
	cfg, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PodCertificates.Enabled {
		t.Error("the pod certificate signer is on without a podCertificates section")
	}

	cfg, err = Parse([]byte(minimal + "podCertificates: {enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := PodCertificates{Enabled: true, SignerName: DefaultPodCertificateSignerName, WaitForIdentity: 5 * time.Minute}
	if cfg.PodCertificates != want {
		t.Errorf("defaults = %+v, want %+v", cfg.PodCertificates, want)
	}
	// Over the admin socket SPIRE signs no downstream CA: start-up must say so, naming the field.
	if err := cfg.CheckPodCertificatesConnection(); err == nil || !strings.Contains(err.Error(), "podCertificates.enabled") ||
		!strings.Contains(err.Error(), "spireServerAddress") {
		t.Errorf("CheckPodCertificatesConnection over the admin socket = %v, want an error naming podCertificates.enabled and spireServerAddress", err)
	}
	if err := cfg.UseSPIREServerAddressFlags("spire-server.spire-system:8081", "/run/spire/agent.sock"); err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckPodCertificatesConnection(); err != nil {
		t.Errorf("CheckPodCertificatesConnection over mTLS: %v", err)
	}

	cfg, err = Parse([]byte(minimal + "podCertificates: {enabled: true, signerName: example.com/svid, caTTL: 48h, failPendingAfter: 10m, waitForIdentity: 0s, " +
		"federatedSignerName: example.com/svid-federated, trustNonNodeRequesters: true, allowAdminIdentities: true, allowDownstreamIdentities: true, " +
		"defaultTTL: 2h, maxTTL: 12h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = PodCertificates{Enabled: true, SignerName: "example.com/svid", CATTL: 48 * time.Hour, FailPendingAfter: 10 * time.Minute,
		FederatedSignerName: "example.com/svid-federated", TrustNonNodeRequesters: true, AllowAdminIdentities: true, AllowDownstreamIdentities: true,
		DefaultTTL: 2 * time.Hour, MaxTTL: 12 * time.Hour}
	if cfg.PodCertificates != want {
		t.Errorf("parsed = %+v, want %+v", cfg.PodCertificates, want)
	}
}
