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
	"crypto/x509"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

func TestValidateSpec(t *testing.T) {
	doc := bundleDoc(t, "fed.org", []*x509.Certificate{newCA(t, "fed.org")}, nil, 0, 0)
	valid := func(mutate func(*spirev1alpha1.ClusterFederatedTrustDomainSpec)) *spirev1alpha1.ClusterFederatedTrustDomainSpec {
		s := &spirev1alpha1.ClusterFederatedTrustDomainSpec{TrustDomain: "fed.org", BundleEndpointURL: "https://fed.org:8443/bundle",
			BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSWebProfileType}}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	for _, tc := range []struct {
		name       string
		spec       *spirev1alpha1.ClusterFederatedTrustDomainSpec
		own        string
		wantFields []string
		wantDetail string
	}{
		{name: "valid https_web", spec: valid(nil), own: "example.org"},
		{name: "valid https_spiffe with a bundle", own: "example.org", spec: valid(func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile = spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSSPIFFEProfileType, EndpointSPIFFEID: "spiffe://fed.org/spire/server"}
			s.TrustDomainBundle = doc
		})},
		{name: "own trust domain unknown skips that check", spec: valid(func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "example.org" })},
		{name: "own trust domain", own: "example.org", spec: valid(func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "example.org" }),
			wantFields: []string{"spec.trustDomain"}, wantDetail: "own trust domain"},
		{name: "bundle that is not a SPIFFE bundle", own: "example.org", spec: valid(func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomainBundle = `{"keys": 5}` }),
			wantFields: []string{"spec.trustDomainBundle"}},
		{name: "http URL", own: "example.org", spec: valid(func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "http://fed.org/bundle" }),
			wantFields: []string{"spec.bundleEndpointURL"}, wantDetail: "https"},
		{name: "bad port", own: "example.org", spec: valid(func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "https://fed.org:99999/bundle"
		}),
			wantFields: []string{"spec.bundleEndpointURL"}, wantDetail: "port"},
		{name: "port that is not a number", own: "example.org", spec: valid(func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "https://fed.org:https/bundle"
		}),
			wantFields: []string{"spec.bundleEndpointURL"}, wantDetail: "port"},
		{name: "https_spiffe without endpoint ID", own: "example.org", spec: valid(func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile = spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSSPIFFEProfileType}
		}), wantFields: []string{"spec.bundleEndpointProfile.endpointSPIFFEID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateSpec(tc.spec, tc.own)
			var fields []string
			for _, err := range errs {
				fields = append(fields, err.Field)
			}
			if diff := cmp.Diff(tc.wantFields, fields); diff != "" {
				t.Fatalf("error fields (-want +got):\n%s\nerrors: %v", diff, errs)
			}
			if tc.wantDetail != "" && !strings.Contains(errs[0].Error(), tc.wantDetail) {
				t.Errorf("error %q does not contain %q", errs[0].Error(), tc.wantDetail)
			}
		})
	}
}
