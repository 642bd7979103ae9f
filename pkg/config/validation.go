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
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks the file, applies defaults and returns the runtime Config. Every problem is
// reported, each naming its field.
func (f *File) Validate() (*Config, error) {
	var errs field.ErrorList
	cfg := &Config{
		ClusterName:            f.ClusterName,
		ClusterDomain:          f.ClusterDomain,
		SPIREServerSocketPath:  f.SPIREServerSocketPath,
		ParentIDTemplate:       f.ParentIDTemplate,
		ClassName:              f.ClassName,
		WatchClassless:         f.WatchClassless,
		GCInterval:             DefaultGCInterval,
		IgnoreNamespaces:       DefaultIgnoreNamespaces,
		MetricsBindAddress:     DisabledAddress,
		HealthProbeBindAddress: DisabledAddress,
		ReadinessEndpointName:  "readyz",
		Reconcile:              Reconcile{ClusterSPIFFEIDs: true, ClusterStaticEntries: true, ClusterFederatedTrustDomains: true},
		LivenessEndpointName:   "healthz",
	}

	if f.APIVersion != "" && f.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), f.APIVersion, []string{APIVersion}))
	}
	if f.Kind != "" && f.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), f.Kind, []string{Kind}))
	}

	if f.TrustDomain == "" {
		errs = append(errs, field.Required(field.NewPath("trustDomain"), "the SPIFFE trust domain, e.g. example.org"))
	} else if td, err := spiffeid.TrustDomainFromString(f.TrustDomain); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("trustDomain"), f.TrustDomain, err.Error()))
	} else if td.String() != f.TrustDomain {
		// TrustDomainFromString also accepts a spiffe:// URI; the config wants the bare name.
		errs = append(errs, field.Invalid(field.NewPath("trustDomain"), f.TrustDomain, "want a bare trust domain name like example.org"))
	} else {
		cfg.TrustDomain = td
	}

	if f.ClusterName == "" && f.StaticManifestPath == nil {
		errs = append(errs, field.Required(field.NewPath("clusterName"), "the cluster name SPIRE's k8s_psat attestor uses"))
	}
	if f.ClusterDomain != "" && strings.Trim(f.ClusterDomain, ".") != f.ClusterDomain {
		errs = append(errs, field.Invalid(field.NewPath("clusterDomain"), f.ClusterDomain, "must not start or end with a dot"))
	}
	errs = append(errs, f.validateSPIREConnection(cfg)...)

	if f.IgnoreNamespaces != nil {
		cfg.IgnoreNamespaces = *f.IgnoreNamespaces
	}
	for i, pattern := range cfg.IgnoreNamespaces {
		// Compiled as given and searched, not anchored, as spire-controller-manager does:
		// "spire" ignores spire-server too.
		re, err := regexp.Compile(pattern)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath("ignoreNamespaces").Index(i), pattern, err.Error()))
			continue
		}
		cfg.ignoreNamespaces = append(cfg.ignoreNamespaces, re)
	}

	if cfg.ParentIDTemplate == "" {
		cfg.ParentIDTemplate = DefaultParentIDTemplate
	} else if _, err := template.New("parentIDTemplate").Parse(cfg.ParentIDTemplate); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("parentIDTemplate"), cfg.ParentIDTemplate, err.Error()))
	}

	if f.GCInterval != nil {
		if err := f.GCInterval.validate(field.NewPath("gcInterval")); err != nil {
			errs = append(errs, err)
		}
		cfg.GCInterval = f.GCInterval.Duration
	}

	if r := f.Reconcile; r != nil {
		// As in spire-controller-manager: a reconcile block enables exactly the kinds it sets.
		cfg.Reconcile = Reconcile{ClusterSPIFFEIDs: r.ClusterSPIFFEIDs, ClusterStaticEntries: r.ClusterStaticEntries,
			ClusterFederatedTrustDomains: r.ClusterFederatedTrustDomains}
		if cfg.Reconcile == (Reconcile{}) {
			// spire-controller-manager accepts it too, and the chart's users set it to stop a
			// controller manager without deleting the chart's resources.
			cfg.unused("reconcile", "it enables no kind: nothing is reconciled, and only the Lease and the webhook are served")
		}
	}
	errs = append(errs, f.validatePrefixes(cfg)...)
	errs = append(errs, f.validateServing(cfg)...)
	errs = append(errs, f.validateLeaderElection(cfg)...)
	errs = append(errs, f.validateStaticMode(cfg)...)
	errs = append(errs, f.validateLogging(cfg)...)
	errs = append(errs, f.validateCaches(cfg)...)
	errs = append(errs, f.validateManager(cfg)...)
	errs = append(errs, f.validatePodCertificates(cfg)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid config: %w", errs.ToAggregate())
	}
	return cfg, nil
}

// entryIDPrefixPattern is what an entry ID prefix may be: SPIRE accepts these characters in
// entry IDs, and the dot is the separator the prefix is followed by.
var entryIDPrefixPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validatePrefixes applies entryIDPrefix and entryIDPrefixCleanup.
func (f *File) validatePrefixes(cfg *Config) field.ErrorList {
	var errs field.ErrorList
	cfg.EntryIDPrefix = f.EntryIDPrefix
	if f.EntryIDPrefix != "" && !entryIDPrefixPattern.MatchString(f.EntryIDPrefix) {
		errs = append(errs, field.Invalid(field.NewPath("entryIDPrefix"), f.EntryIDPrefix,
			"must be 1 to 64 letters, digits, '-' or '_'"))
	}
	if f.EntryIDPrefixCleanup != nil {
		cleanup := *f.EntryIDPrefixCleanup
		path := field.NewPath("entryIDPrefixCleanup")
		switch {
		case cleanup == f.EntryIDPrefix:
			errs = append(errs, field.Invalid(path, cleanup, "must differ from entryIDPrefix: it deletes the entries it names"))
		case cleanup != "" && !entryIDPrefixPattern.MatchString(cleanup):
			errs = append(errs, field.Invalid(path, cleanup, "must be \"\" or 1 to 64 letters, digits, '-' or '_'"))
		}
		cfg.EntryIDPrefixCleanup = &cleanup
	}
	return errs
}

// validateServing applies the metrics and health settings.
func (f *File) validateServing(cfg *Config) field.ErrorList {
	var errs field.ErrorList
	if f.Metrics != nil && f.Metrics.BindAddress != "" {
		cfg.MetricsBindAddress = f.Metrics.BindAddress
		errs = append(errs, validateAddress(field.NewPath("metrics", "bindAddress"), cfg.MetricsBindAddress)...)
	}
	if f.Health == nil {
		return errs
	}
	path := field.NewPath("health")
	if f.Health.HealthProbeBindAddress != "" {
		cfg.HealthProbeBindAddress = f.Health.HealthProbeBindAddress
		errs = append(errs, validateAddress(path.Child("healthProbeBindAddress"), cfg.HealthProbeBindAddress)...)
	}
	for _, ep := range []struct {
		name  string
		value string
		into  *string
	}{
		{"readinessEndpointName", f.Health.ReadinessEndpointName, &cfg.ReadinessEndpointName},
		{"livenessEndpointName", f.Health.LivenessEndpointName, &cfg.LivenessEndpointName},
	} {
		if ep.value == "" {
			continue
		}
		if strings.ContainsAny(ep.value, "/ ?#") {
			errs = append(errs, field.Invalid(path.Child(ep.name), ep.value, "must be a single path segment, like readyz"))
		}
		*ep.into = ep.value
	}
	return errs
}

// validateAddress accepts "0" (disabled) or a host:port to listen on.
func validateAddress(path *field.Path, addr string) field.ErrorList {
	if addr == DisabledAddress {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		// SplitHostPort does not look at the port: "localhost:8083/healthz" would only fail
		// later, when the server starts listening.
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return field.ErrorList{field.Invalid(path, addr, "want host:port with a numeric port, :port, or \"0\" to disable")}
	}
	return nil
}

// validateLeaderElection applies the leader election settings.
func (f *File) validateLeaderElection(cfg *Config) field.ErrorList {
	le := &cfg.LeaderElection
	le.ResourceName, le.LeaseDuration, le.RenewDeadline, le.RetryPeriod =
		DefaultLeaseName, DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod
	if f.LeaderElection == nil {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("leaderElection")
	in := f.LeaderElection
	le.Enabled = in.LeaderElect != nil && *in.LeaderElect
	if in.ResourceName != "" {
		le.ResourceName = in.ResourceName
	}
	le.ResourceNamespace = in.ResourceNamespace
	if in.ResourceLock != "" && in.ResourceLock != "leases" {
		errs = append(errs, field.NotSupported(path.Child("resourceLock"), in.ResourceLock, []string{"leases"}))
	}
	for _, d := range []struct {
		name string
		in   *Duration
		into *time.Duration
	}{
		{"leaseDuration", in.LeaseDuration, &le.LeaseDuration},
		{"renewDeadline", in.RenewDeadline, &le.RenewDeadline},
		{"retryPeriod", in.RetryPeriod, &le.RetryPeriod},
	} {
		if d.in == nil {
			continue
		}
		if err := d.in.validate(path.Child(d.name)); err != nil {
			errs = append(errs, err)
			continue
		}
		*d.into = d.in.Duration
	}
	if le.RenewDeadline >= le.LeaseDuration {
		errs = append(errs, field.Invalid(path.Child("renewDeadline"), le.RenewDeadline.String(), "must be shorter than leaseDuration"))
	}
	return errs
}

// validateStaticMode applies staticManifestPath, which replaces the Kubernetes API with a
// directory of manifests, and refuses what needs that API.
func (f *File) validateStaticMode(cfg *Config) field.ErrorList {
	if f.StaticManifestPath == nil {
		var errs field.ErrorList
		if f.ExpandEnvStaticManifests {
			errs = append(errs, field.Invalid(field.NewPath("expandEnvStaticManifests"), true, "only has an effect with staticManifestPath"))
		}
		if f.StaticManifestLimits != nil {
			errs = append(errs, field.Forbidden(field.NewPath("staticManifestLimits"), "only has an effect with staticManifestPath"))
		}
		return errs
	}
	var errs field.ErrorList
	cfg.StaticManifestPath, cfg.ExpandEnvStaticManifests = *f.StaticManifestPath, f.ExpandEnvStaticManifests
	if cfg.StaticManifestPath == "" {
		errs = append(errs, field.Required(field.NewPath("staticManifestPath"), "the directory of ClusterStaticEntry and ClusterFederatedTrustDomain manifests"))
	}
	if f.Reconcile != nil && f.Reconcile.ClusterSPIFFEIDs {
		errs = append(errs, field.Forbidden(field.NewPath("reconcile", "clusterSPIFFEIDs"),
			"not available with staticManifestPath: ClusterSPIFFEIDs select pods, and static mode has no cluster"))
	}
	cfg.Reconcile.ClusterSPIFFEIDs = false
	if cfg.LeaderElection.Enabled {
		errs = append(errs, field.Forbidden(field.NewPath("leaderElection", "leaderElect"),
			"not available with staticManifestPath: static mode has no Kubernetes API to hold a Lease in"))
	}
	return append(errs, f.StaticManifestLimits.validate(cfg)...)
}
