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

package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	"github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestAdmissionRejectsMalformedResources submits malformed resources to the real apiserver with
// our CRDs: what can be checked statically is refused at admission, with a message naming the
// field, and valid resources are accepted.
func TestAdmissionRejectsMalformedResources(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver")
	}
	kube := realcluster.NewKube(t, realcluster.KubeOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := realcluster.CRDsDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.ApplyCRDs(ctx, kube.RESTConfig(), dir); err != nil {
		t.Fatal(err)
	}
	client, err := spireclientset.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	api := client.SpireV1alpha1()
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
	dur := func(s string) metav1.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return metav1.Duration{Duration: d}
	}

	csid := func(mutate func(*v1alpha1.ClusterSPIFFEIDSpec)) func(string) error {
		return func(name string) error {
			spec := v1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}"}
			mutate(&spec)
			_, err := api.ClusterSPIFFEIDs().Create(ctx, &v1alpha1.ClusterSPIFFEID{ObjectMeta: meta(name), Spec: spec}, metav1.CreateOptions{})
			return err
		}
	}
	cse := func(mutate func(*v1alpha1.ClusterStaticEntrySpec)) func(string) error {
		return func(name string) error {
			spec := v1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server",
				Selectors: []string{"unix:uid:999"}}
			mutate(&spec)
			_, err := api.ClusterStaticEntries().Create(ctx, &v1alpha1.ClusterStaticEntry{ObjectMeta: meta(name), Spec: spec}, metav1.CreateOptions{})
			return err
		}
	}
	cftd := func(mutate func(*v1alpha1.ClusterFederatedTrustDomainSpec)) func(string) error {
		return func(name string) error {
			spec := v1alpha1.ClusterFederatedTrustDomainSpec{TrustDomain: "partner.org", BundleEndpointURL: "https://partner.org:8443/bundle",
				BundleEndpointProfile: v1alpha1.BundleEndpointProfile{Type: v1alpha1.HTTPSWebProfileType}}
			mutate(&spec)
			_, err := api.ClusterFederatedTrustDomains().Create(ctx, &v1alpha1.ClusterFederatedTrustDomain{ObjectMeta: meta(name), Spec: spec}, metav1.CreateOptions{})
			return err
		}
	}

	for _, tc := range []struct {
		name   string
		create func(name string) error
		field  string // "" means the resource must be accepted
	}{
		{"valid ClusterSPIFFEID", csid(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.TTL = dur("1h")
			s.FederatesWith = []string{"spiffe://partner.org", "other.org"}
		}), ""},
		{"SPIFFE ID template not spiffe://", csid(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "https://x/{{ .PodMeta.Name }}" }), "spec.spiffeIDTemplate"},
		{"empty SPIFFE ID template", csid(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "" }), "spec.spiffeIDTemplate"},
		{"negative ttl", csid(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.TTL = dur("-1h") }), "spec.ttl"},
		{"negative jwtTtl", csid(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.JWTTTL = dur("-5m") }), "spec.jwtTtl"},
		{"bad federatesWith", csid(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{"Partner Org"} }), "spec.federatesWith[0]"},
		{"bad label selector operator", csid(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a"}}}
		}), "spec.podSelector.matchExpressions[0].operator"},

		{"valid ClusterStaticEntry", cse(func(*v1alpha1.ClusterStaticEntrySpec) {}), ""},
		{"static SPIFFE ID not spiffe://", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.SPIFFEID = "example.org/db" }), "spec.spiffeID"},
		{"static parent ID not spiffe://", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.ParentID = "/spire/server" }), "spec.parentID"},
		{"no selectors", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{} }), "spec.selectors"},
		{"selector without colon", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{"unix"} }), "spec.selectors[0]"},
		{"selector with empty value", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{"unix:"} }), "spec.selectors[0]"},
		{"negative x509SVIDTTL", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.X509SVIDTTL = dur("-1s") }), "spec.x509SVIDTTL"},
		{"bad static federatesWith", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.FederatesWith = []string{"a b"} }), "spec.federatesWith[0]"},

		{"valid https_web", cftd(func(*v1alpha1.ClusterFederatedTrustDomainSpec) {}), ""},
		{"valid https_spiffe", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.TrustDomain = "spiffe-profile.org"
			s.BundleEndpointProfile = v1alpha1.BundleEndpointProfile{Type: v1alpha1.HTTPSSPIFFEProfileType, EndpointSPIFFEID: "spiffe://spiffe-profile.org/spire/server"}
		}), ""},
		{"http bundle URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "http://partner.org/bundle" }), "spec.bundleEndpointURL"},
		{"bundle URL without host", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "https:///bundle" }), "spec.bundleEndpointURL"},
		{"bundle URL with userinfo", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "https://user:pw@partner.org/bundle"
		}), "spec.bundleEndpointURL"},
		{"not a URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "partner.org" }), "spec.bundleEndpointURL"},
		{"bad trust domain", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "Partner.Org" }), "spec.trustDomain"},
		{"unknown profile", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointProfile.Type = "https_other" }), "spec.bundleEndpointProfile.type"},
		{"https_spiffe without endpoint ID", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile.Type = v1alpha1.HTTPSSPIFFEProfileType
		}), "spec.bundleEndpointProfile"},
		{"https_web with endpoint ID", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile.EndpointSPIFFEID = "spiffe://partner.org/spire/server"
		}), "spec.bundleEndpointProfile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ToLower(strings.NewReplacer(" ", "-", ":", "", "/", "", "_", "-").Replace(tc.name))
			err := tc.create(name)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid resource rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want a rejection naming %s", tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("rejection does not name %s: %v", tc.field, err)
			}
		})
	}
}
