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
	"crypto"
	"crypto/x509"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/testing/protocmp"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

func TestToRelationship(t *testing.T) {
	own := spiffeid.RequireTrustDomainFromString("example.org")
	ca := newCA(t, "fed.org")
	doc := bundleDoc(t, "fed.org", []*x509.Certificate{ca}, nil, 0, 0)
	withJWT := bundleDoc(t, "fed.org", nil, map[string]crypto.PublicKey{"kid-1": newJWTKey(t)}, 0, 0)
	if !strings.Contains(withJWT, `"kid":"kid-1",`) {
		t.Fatalf("unexpected bundle document %s", withJWT)
	}
	spiffe := func(id string) spirev1alpha1.BundleEndpointProfile {
		return spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSSPIFFEProfileType, EndpointSPIFFEID: id}
	}
	httpsWeb := &spiretypes.FederationRelationship_HttpsWeb{HttpsWeb: &spiretypes.HTTPSWebProfile{}}

	tests := []struct {
		name   string
		mutate func(*spirev1alpha1.ClusterFederatedTrustDomainSpec)
		// wantErr lists substrings the error must contain; empty means valid.
		wantErr []string
		// notInErr lists substrings the error must not contain (secrets).
		notInErr []string
		// want is the relationship a valid spec converts to; nil skips the comparison.
		want *spiretypes.FederationRelationship
	}{
		{name: "https_web", want: &spiretypes.FederationRelationship{TrustDomain: "fed.org",
			BundleEndpointUrl: "https://fed.org:8443/bundle", BundleEndpointProfile: httpsWeb}},
		{name: "https_spiffe with bundle", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile = spiffe("spiffe://fed.org/spire/server")
			s.TrustDomainBundle = doc
		}, want: &spiretypes.FederationRelationship{TrustDomain: "fed.org", BundleEndpointUrl: "https://fed.org:8443/bundle",
			BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsSpiffe{
				HttpsSpiffe: &spiretypes.HTTPSSPIFFEProfile{EndpointSpiffeId: "spiffe://fed.org/spire/server"}},
			TrustDomainBundle: &spiretypes.Bundle{TrustDomain: "fed.org", X509Authorities: []*spiretypes.X509Certificate{{Asn1: ca.Raw}}},
		}},
		{name: "endpoint in another trust domain", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile = spiffe("spiffe://other.org/server")
		}},
		{name: "URL normalised as SPIRE stores it", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "HTTPS://fed.org/a b"
		}, want: &spiretypes.FederationRelationship{TrustDomain: "fed.org",
			BundleEndpointUrl: "https://fed.org/a%20b", BundleEndpointProfile: httpsWeb}},

		{name: "missing trust domain", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "" },
			wantErr: []string{"spec.trustDomain: Required"}},
		{name: "trust domain with bad characters", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "Fed.org" },
			wantErr: []string{"spec.trustDomain: Invalid value"}},
		{name: "trust domain as SPIFFE ID", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "spiffe://fed.org" },
			wantErr: []string{"spec.trustDomain", "bare trust domain name"}},
		{name: "own trust domain", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "example.org" },
			wantErr: []string{"spec.trustDomain", "own trust domain"}},
		{name: "missing URL", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "" },
			wantErr: []string{"spec.bundleEndpointURL: Required"}},
		{name: "unparsable URL", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "https://[::1" },
			wantErr: []string{"spec.bundleEndpointURL", "must be a URL"}},
		{name: "http URL", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "http://fed.org/bundle" },
			wantErr: []string{"spec.bundleEndpointURL", "https scheme"}},
		{name: "URL without scheme", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "fed.org/bundle" },
			wantErr: []string{"spec.bundleEndpointURL", "https scheme"}},
		{name: "URL without host", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "https:///bundle" },
			wantErr: []string{"spec.bundleEndpointURL", "host"}},
		{name: "URL with user info", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "https://me:s3cret@fed.org/"
		},
			wantErr: []string{"spec.bundleEndpointURL", "user info"}, notInErr: []string{"s3cret"}},
		{name: "missing profile type", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointProfile.Type = "" },
			wantErr: []string{"spec.bundleEndpointProfile.type: Required"}},
		{name: "unknown profile type", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointProfile.Type = "https_jwt" },
			wantErr: []string{"spec.bundleEndpointProfile.type: Unsupported value"}},
		{name: "https_web with endpoint SPIFFE ID", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile.EndpointSPIFFEID = "spiffe://fed.org/server"
		}, wantErr: []string{"spec.bundleEndpointProfile.endpointSPIFFEID: Forbidden"}},
		{name: "https_spiffe without endpoint SPIFFE ID", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile = spiffe("")
		}, wantErr: []string{"spec.bundleEndpointProfile.endpointSPIFFEID: Required"}},
		{name: "https_spiffe with invalid endpoint SPIFFE ID", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile = spiffe("spiffe://fed.org/a//b")
		}, wantErr: []string{"spec.bundleEndpointProfile.endpointSPIFFEID: Invalid value"}},
		{name: "bundle that is not JSON", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.TrustDomainBundle = "-----BEGIN CERTIFICATE-----"
		},
			wantErr: []string{"spec.trustDomainBundle: Invalid value"}},
		{name: "bundle without keys", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomainBundle = `{"spiffe_sequence": 1}` },
			wantErr: []string{"spec.trustDomainBundle", "no authorities"}},
		{name: "bundle with a JWT key without key ID", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.TrustDomainBundle = strings.Replace(withJWT, `"kid":"kid-1",`, "", 1)
		}, wantErr: []string{"spec.trustDomainBundle", "keyID cannot be empty"}},
		{name: "several errors at once", mutate: func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "http://fed.org"
			s.BundleEndpointProfile = spiffe("")
		}, wantErr: []string{"spec.bundleEndpointURL", "spec.bundleEndpointProfile.endpointSPIFFEID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := webSpec("fed.org", "https://fed.org:8443/bundle")
			if tt.mutate != nil {
				tt.mutate(&spec)
			}
			rel, errs := toRelationship(&spec, own)
			if len(tt.wantErr) == 0 {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				if tt.want != nil {
					if diff := cmp.Diff(tt.want, rel, protocmp.Transform()); diff != "" {
						t.Errorf("relationship (-want +got):\n%s", diff)
					}
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("no error, relationship %v", rel)
			}
			if rel != nil {
				t.Errorf("invalid spec converted to %v", rel)
			}
			msg := errs.ToAggregate().Error()
			for _, want := range tt.wantErr {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			for _, secret := range tt.notInErr {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q leaks %q", msg, secret)
				}
			}
		})
	}
}
