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
	"testing"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// FuzzToRelationship feeds arbitrary ClusterFederatedTrustDomain specs to the validation that
// stands between a resource and SPIRE: it must never panic, and whatever it accepts must be
// what SPIRE takes: a bare trust domain other than our own, an https URL with a host and no
// user info, a profile with an endpoint SPIFFE ID exactly when it is https_spiffe.
func FuzzToRelationship(f *testing.F) {
	f.Add("partner.org", "https://partner.org/bundle", "https_web", "", "")
	f.Add("partner.org", "https://partner.org:8443", "https_spiffe", "spiffe://partner.org/spire/server", `{"keys":[]}`)
	f.Add("spiffe://partner.org", "http://partner.org", "https_web", "spiffe://x/y", "{")
	f.Add("example.org", "https://user:pw@partner.org/", "https_spiffe", "", "null")
	f.Add("Partner.ORG", "https:///bundle", "other", "spiffe://partner.org", `{"keys":[{"use":"x509-svid"}]}`)
	own := spiffeid.RequireTrustDomainFromString("example.org")
	f.Fuzz(func(t *testing.T, trustDomain, endpointURL, profile, endpointID, bundle string) {
		spec := &spirev1alpha1.ClusterFederatedTrustDomainSpec{
			TrustDomain:       trustDomain,
			BundleEndpointURL: endpointURL,
			BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{
				Type: spirev1alpha1.BundleEndpointProfileType(profile), EndpointSPIFFEID: endpointID,
			},
			TrustDomainBundle: bundle,
		}
		rel, errs := toRelationship(spec, own)
		if len(errs) > 0 {
			if rel != nil {
				t.Fatalf("errors %v but a relationship too", errs)
			}
			return
		}
		td, err := spiffeid.TrustDomainFromString(rel.TrustDomain)
		if err != nil || td.Name() != trustDomain || td == own {
			t.Fatalf("accepted trust domain %q (spec %q, err %v)", rel.TrustDomain, trustDomain, err)
		}
		u, err := url.Parse(rel.BundleEndpointUrl)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			t.Fatalf("accepted bundle endpoint URL %q (err %v)", rel.BundleEndpointUrl, err)
		}
		if (profile == string(spirev1alpha1.HTTPSSPIFFEProfileType)) != (rel.GetHttpsSpiffe() != nil) {
			t.Fatalf("profile %q became %T", profile, rel.BundleEndpointProfile)
		}
		if s := rel.GetHttpsSpiffe(); s != nil {
			if _, err := spiffeid.FromString(s.EndpointSpiffeId); err != nil {
				t.Fatalf("accepted endpoint SPIFFE ID %q: %v", s.EndpointSpiffeId, err)
			}
		} else if rel.GetHttpsWeb() == nil || endpointID != "" {
			t.Fatalf("https_web accepted with endpoint SPIFFE ID %q or no profile (%T)", endpointID, rel.BundleEndpointProfile)
		}
	})
}
