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
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultPodCertificateSignerName is the signer name spire-registrar signs
// PodCertificateRequests for, and publishes SPIRE's trust bundle as a ClusterTrustBundle for,
// unless podCertificates.signerName says otherwise.
const DefaultPodCertificateSignerName = "spire.spiffe.io/x509-svid"

// PodCertificatesConfig is spire-registrar's own section, which spire-controller-manager does
// not have: a signer of Kubernetes PodCertificateRequests that issues X509-SVIDs under SPIRE's
// trust domain with a downstream CA from SPIRE, and SPIRE's X.509 authorities published as a
// ClusterTrustBundle.
type PodCertificatesConfig struct {
	// Enabled turns the signer on. It needs spireServerAddress: SPIRE gives a downstream CA
	// only to a caller authenticated by an X509-SVID whose entry is downstream.
	Enabled bool `json:"enabled"`
	// SignerName is the signer PodCertificateRequests and podCertificate volumes name;
	// default spire.spiffe.io/x509-svid.
	SignerName string `json:"signerName"`
	// CATTL is the lifetime asked of SPIRE for the downstream CA, renewed at half of it;
	// default: SPIRE's own (its ca_ttl).
	CATTL *Duration `json:"caTTL"`
	// FailPendingAfter marks a request Failed once it has waited this long for a usable CA
	// (SPIRE unreachable, or refusing to renew it); default: never. A Failed request is final
	// for the kubelet: the pod's volume stays failed until the pod is replaced.
	FailPendingAfter *Duration `json:"failPendingAfter"`
	// TrustNonNodeRequesters lets the signer run without the node-only admission policy of
	// manifests/pod-certificates, trusting every user allowed to create PodCertificateRequests
	// for the signer to name only pods it may speak for; default false.
	TrustNonNodeRequesters bool `json:"trustNonNodeRequesters"`
	// AllowAdminIdentities and AllowDownstreamIdentities let ClusterSPIFFEIDs marked admin or
	// downstream give pods certificates, with the rights SPIRE grants those entries; default
	// false.
	AllowAdminIdentities      bool `json:"allowAdminIdentities"`
	AllowDownstreamIdentities bool `json:"allowDownstreamIdentities"`
	// DefaultTTL is the lifetime of a pod certificate whose ClusterSPIFFEID sets no ttl;
	// default 1h, SPIRE's default X509-SVID TTL.
	DefaultTTL *Duration `json:"defaultTTL"`
	// MaxTTL caps every pod certificate's lifetime, a ClusterSPIFFEID's ttl included; default:
	// no cap but the request's maxExpirationSeconds.
	MaxTTL *Duration `json:"maxTTL"`
	// WaitForIdentity is how long after its creation a request whose pod has no identity
	// (no ClusterSPIFFEID gives it one) waits for one before it is denied; default 5m, at
	// most 10m, 0 denies at once.
	WaitForIdentity *Duration `json:"waitForIdentity"`
	// FederatedSignerName, when set, publishes the X.509 authorities of each trust domain
	// SPIRE federates with as a ClusterTrustBundle of this signer name, labelled
	// spire.spiffe.io/trust-domain=<trust domain>. It must differ from signerName, so that
	// pods mounting every bundle of signerName keep trusting their own trust domain only;
	// default: none, federated trust is not published.
	FederatedSignerName string `json:"federatedSignerName"`
}

// PodCertificates is the validated podCertificates section.
type PodCertificates struct {
	Enabled                   bool
	SignerName                string
	CATTL                     time.Duration
	FailPendingAfter          time.Duration
	WaitForIdentity           time.Duration
	FederatedSignerName       string
	TrustNonNodeRequesters    bool
	AllowAdminIdentities      bool
	AllowDownstreamIdentities bool
	// DefaultTTL and MaxTTL are 0 when not set.
	DefaultTTL, MaxTTL time.Duration
}

// DefaultWaitForIdentity and MaxWaitForIdentity bound podCertificates.waitForIdentity. A
// denial is final for the kubelet, so a request whose pod has no identity waits for a
// ClusterSPIFFEID applied again or a label change. kube-controller-manager deletes every
// request 15 minutes after its creation and the kubelet then makes a new one, so a request
// that waited that long would never be denied and the pod never told why: the wait ends
// well before. Five minutes outlasts a GitOps delete-and-create or a relabelling, and leaves
// a refreshing pod (refresh at half of a lifetime of an hour or more) its certificate.
const (
	DefaultWaitForIdentity = 5 * time.Minute
	MaxWaitForIdentity     = 10 * time.Minute
)

// validatePodCertificates applies the podCertificates section.
func (f *File) validatePodCertificates(cfg *Config) field.ErrorList {
	p := f.PodCertificates
	if p == nil {
		return nil
	}
	path := field.NewPath("podCertificates")
	var errs field.ErrorList
	cfg.PodCertificates = PodCertificates{Enabled: p.Enabled, SignerName: p.SignerName, WaitForIdentity: DefaultWaitForIdentity,
		TrustNonNodeRequesters: p.TrustNonNodeRequesters, AllowAdminIdentities: p.AllowAdminIdentities, AllowDownstreamIdentities: p.AllowDownstreamIdentities}
	if cfg.PodCertificates.SignerName == "" {
		cfg.PodCertificates.SignerName = DefaultPodCertificateSignerName
	} else if err := validateSignerName(path.Child("signerName"), p.SignerName); err != nil {
		errs = append(errs, err)
	}
	if p.CATTL != nil {
		if err := p.CATTL.validate(path.Child("caTTL")); err != nil {
			errs = append(errs, err)
		} else if p.CATTL.Duration < 2*time.Hour {
			// Renewed at half life, a CA must still cover a leaf of kube-apiserver's one-hour
			// minimum when it is replaced.
			errs = append(errs, field.Invalid(path.Child("caTTL"), p.CATTL.String(), "must be at least 2h: the CA is renewed at half its life and must then still cover a one-hour certificate"))
		}
		cfg.PodCertificates.CATTL = p.CATTL.Duration
	}
	if p.FailPendingAfter != nil {
		if err := p.FailPendingAfter.validate(path.Child("failPendingAfter")); err != nil {
			errs = append(errs, err)
		}
		cfg.PodCertificates.FailPendingAfter = p.FailPendingAfter.Duration
	}
	if p.WaitForIdentity != nil {
		if err := p.WaitForIdentity.validateParsed(path.Child("waitForIdentity")); err != nil {
			errs = append(errs, err)
		} else if p.WaitForIdentity.Duration < 0 {
			errs = append(errs, field.Invalid(path.Child("waitForIdentity"), p.WaitForIdentity.String(), "must not be negative; 0 denies at once"))
		} else if p.WaitForIdentity.Duration > MaxWaitForIdentity {
			errs = append(errs, field.Invalid(path.Child("waitForIdentity"), p.WaitForIdentity.String(),
				"must be at most 10m: kube-controller-manager deletes a request 15 minutes after its creation, and one that waits longer is never denied"))
		}
		cfg.PodCertificates.WaitForIdentity = p.WaitForIdentity.Duration
	}
	if p.FederatedSignerName != "" {
		if err := validateSignerName(path.Child("federatedSignerName"), p.FederatedSignerName); err != nil {
			errs = append(errs, err)
		} else if p.FederatedSignerName == cfg.PodCertificates.SignerName {
			errs = append(errs, field.Invalid(path.Child("federatedSignerName"), p.FederatedSignerName,
				"must differ from signerName: pods that mount every bundle of signerName would trust the federated trust domains too"))
		}
		cfg.PodCertificates.FederatedSignerName = p.FederatedSignerName
	}
	errs = append(errs, validateCertificateTTL(path.Child("defaultTTL"), p.DefaultTTL, &cfg.PodCertificates.DefaultTTL)...)
	errs = append(errs, validateCertificateTTL(path.Child("maxTTL"), p.MaxTTL, &cfg.PodCertificates.MaxTTL)...)
	if d, m := cfg.PodCertificates.DefaultTTL, cfg.PodCertificates.MaxTTL; d > 0 && m > 0 && d > m {
		errs = append(errs, field.Invalid(path.Child("defaultTTL"), p.DefaultTTL.String(), "must not exceed podCertificates.maxTTL ("+p.MaxTTL.String()+")"))
	}
	if p.Enabled && f.StaticManifestPath != nil {
		errs = append(errs, field.Forbidden(path.Child("enabled"), "static mode has no Kubernetes API to serve PodCertificateRequests from"))
	}
	return errs
}

// validateCertificateTTL applies a pod certificate lifetime, which kube-apiserver accepts
// only of an hour or more.
func validateCertificateTTL(path *field.Path, d *Duration, out *time.Duration) field.ErrorList {
	if d == nil {
		return nil
	}
	if err := d.validate(path); err != nil {
		return field.ErrorList{err}
	}
	if d.Duration < time.Hour {
		return field.ErrorList{field.Invalid(path, d.String(), "must be at least 1h: kube-apiserver accepts no pod certificate that lives less")}
	}
	*out = d.Duration
	return nil
}

// validateSignerName accepts a signer name as Kubernetes does (ValidateSignerName in
// k8s.io/kubernetes pkg/apis/core/validation): a domain of two labels or more, one slash and
// a path of DNS labels, not under kubernetes.io, which is reserved for the Kubernetes project.
func validateSignerName(path *field.Path, name string) *field.Error {
	domain, rest, _ := strings.Cut(name, "/")
	switch {
	case strings.Count(name, "/") != 1 || rest == "":
		return field.Invalid(path, name, "want <domain>/<name>, e.g. example.com/x509-svid")
	case len(validation.IsDNS1123Subdomain(domain)) > 0 || !strings.Contains(domain, "."):
		return field.Invalid(path, name, "the part before the slash must be a domain of two labels or more, e.g. example.com")
	case len(validation.IsDNS1123Subdomain(rest)) > 0:
		return field.Invalid(path, name, "the part after the slash must be DNS labels separated by dots, e.g. x509-svid")
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io"):
		return field.Invalid(path, name, "kubernetes.io signer names are reserved for the Kubernetes project")
	}
	return nil
}

// CheckPodCertificatesConnection reports a pod certificate signer that cannot work over the
// configured SPIRE connection, once the flags are applied: the admin socket authenticates
// its callers by their process, not by an X509-SVID, so SPIRE never signs them a downstream
// CA.
func (c *Config) CheckPodCertificatesConnection() error {
	if !c.PodCertificates.Enabled || c.SPIREServerAddress != "" {
		return nil
	}
	return field.Invalid(field.NewPath("podCertificates", "enabled"), true,
		"needs spireServerAddress (SPIRE's API over TCP with SPIFFE mTLS): SPIRE signs a downstream CA only for a caller authenticated by an X509-SVID whose entry is downstream, which the admin socket's callers are not")
}
