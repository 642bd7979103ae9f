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
	"net/url"
	"strconv"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// ValidateSpec checks a ClusterFederatedTrustDomain's spec as the reconciler does before it
// writes the relationship, for an admission webhook: the trust domain, the bundle endpoint URL
// and port, the profile and its endpoint SPIFFE ID, and that the bundle is a SPIFFE bundle of
// that trust domain. ownTrustDomain is the SPIRE server's, with which no relationship can be
// made; when empty or invalid, that one check is skipped. Every error names its field.
func ValidateSpec(spec *spirev1alpha1.ClusterFederatedTrustDomainSpec, ownTrustDomain string) field.ErrorList {
	own, err := spiffeid.TrustDomainFromString(ownTrustDomain)
	if ownTrustDomain == "" || err != nil {
		own = spiffeid.TrustDomain{}
	}
	_, errs := toRelationship(spec, own)
	return append(errs, validatePort(field.NewPath("spec", "bundleEndpointURL"), spec.BundleEndpointURL)...)
}

// validatePort refuses a bundle endpoint port outside 1-65535, which url.Parse lets through
// and no endpoint can listen on. A URL that does not parse is toRelationship's to report.
func validatePort(p *field.Path, raw string) field.ErrorList {
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		return nil
	}
	if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
		return field.ErrorList{field.Invalid(p, raw, "the port must be between 1 and 65535")}
	}
	return nil
}
