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

package federation

import (
	"errors"
	"net/url"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

var profileTypes = []spirev1alpha1.BundleEndpointProfileType{spirev1alpha1.HTTPSWebProfileType, spirev1alpha1.HTTPSSPIFFEProfileType}

// toRelationship validates a spec and converts it to the relationship SPIRE should hold. It
// checks what SPIRE would reject, so that an invalid resource is reported on itself rather
// than retried against SPIRE, and normalises what SPIRE would normalise (the URL, the
// endpoint SPIFFE ID), so that the relationship SPIRE echoes compares equal to it. own is the
// SPIRE server's trust domain, which cannot federate with itself.
func toRelationship(spec *spirev1alpha1.ClusterFederatedTrustDomainSpec, own spiffeid.TrustDomain) (*spiretypes.FederationRelationship, field.ErrorList) {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	rel := &spiretypes.FederationRelationship{}

	td, tdErrs := validateTrustDomain(specPath.Child("trustDomain"), spec.TrustDomain, own)
	errs = append(errs, tdErrs...)
	rel.TrustDomain = td.Name()

	u, urlErrs := validateBundleEndpointURL(specPath.Child("bundleEndpointURL"), spec.BundleEndpointURL)
	errs = append(errs, urlErrs...)
	if u != nil {
		rel.BundleEndpointUrl = u.String()
	}

	errs = append(errs, validateProfile(specPath.Child("bundleEndpointProfile"), spec.BundleEndpointProfile, rel)...)

	// The bundle JSON does not name its trust domain, so it can only be read once the trust
	// domain parses.
	if spec.TrustDomainBundle != "" && !td.IsZero() {
		b, err := parseBundle(td, spec.TrustDomainBundle)
		if err != nil {
			errs = append(errs, field.Invalid(specPath.Child("trustDomainBundle"), field.OmitValueType{}, err.Error()))
		}
		rel.TrustDomainBundle = b
	}

	if len(errs) > 0 {
		return nil, errs
	}
	return rel, nil
}

func validateTrustDomain(p *field.Path, name string, own spiffeid.TrustDomain) (spiffeid.TrustDomain, field.ErrorList) {
	if name == "" {
		return spiffeid.TrustDomain{}, field.ErrorList{field.Required(p, "")}
	}
	td, err := spiffeid.TrustDomainFromString(name)
	switch {
	case err != nil:
		return td, field.ErrorList{field.Invalid(p, name, err.Error())}
	case td.Name() != name:
		// SPIFFE IDs parse as their trust domain; SPIRE's CLI and SCM take bare names only.
		return td, field.ErrorList{field.Invalid(p, name, "must be a bare trust domain name, such as "+td.Name())}
	case td == own:
		return td, field.ErrorList{field.Invalid(p, name, "is the SPIRE server's own trust domain, which cannot federate with itself")}
	}
	return td, nil
}

func validateBundleEndpointURL(p *field.Path, raw string) (*url.URL, field.ErrorList) {
	if raw == "" {
		return nil, field.ErrorList{field.Required(p, "")}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		// url errors quote the URL, which may hold credentials; keep only the reason.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be a URL: "+err.Error())}
	case u.User != nil:
		return nil, field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must not contain user info")}
	case u.Scheme != "https":
		return nil, field.ErrorList{field.Invalid(p, raw, "must use the https scheme")}
	case u.Host == "":
		return nil, field.ErrorList{field.Invalid(p, raw, "must specify a host")}
	}
	return u, nil
}

// validateProfile sets rel's profile (a oneof, whose interface type is unexported) from a
// valid one.
func validateProfile(p *field.Path, profile spirev1alpha1.BundleEndpointProfile, rel *spiretypes.FederationRelationship) field.ErrorList {
	idPath := p.Child("endpointSPIFFEID")
	switch profile.Type {
	case spirev1alpha1.HTTPSWebProfileType:
		if profile.EndpointSPIFFEID != "" {
			return field.ErrorList{field.Forbidden(idPath, "may only be set for the https_spiffe profile")}
		}
		rel.BundleEndpointProfile = &spiretypes.FederationRelationship_HttpsWeb{HttpsWeb: &spiretypes.HTTPSWebProfile{}}
		return nil
	case spirev1alpha1.HTTPSSPIFFEProfileType:
		if profile.EndpointSPIFFEID == "" {
			return field.ErrorList{field.Required(idPath, "required for the https_spiffe profile")}
		}
		id, err := spiffeid.FromString(profile.EndpointSPIFFEID)
		if err != nil {
			return field.ErrorList{field.Invalid(idPath, profile.EndpointSPIFFEID, err.Error())}
		}
		rel.BundleEndpointProfile = &spiretypes.FederationRelationship_HttpsSpiffe{HttpsSpiffe: &spiretypes.HTTPSSPIFFEProfile{EndpointSpiffeId: id.String()}}
		return nil
	case "":
		return field.ErrorList{field.Required(p.Child("type"), "")}
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), profile.Type, profileTypes)}
	}
}
