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

package render

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

func TestValidateClusterSPIFFEID(t *testing.T) {
	valid := func(mutate func(*spirev1alpha1.ClusterSPIFFEIDSpec)) *spirev1alpha1.ClusterSPIFFEID {
		spec := spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate}
		if mutate != nil {
			mutate(&spec)
		}
		return &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: spec}
	}
	id := func(tmpl string) func(*spirev1alpha1.ClusterSPIFFEIDSpec) {
		return func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = tmpl }
	}
	for _, tc := range []struct {
		name        string
		obj         *spirev1alpha1.ClusterSPIFFEID
		trustDomain string
		// wantFields are the paths of the errors, in order; wantDetail is part of the first.
		wantFields []string
		wantDetail string
	}{
		{name: "valid", obj: valid(nil)},
		{name: "every template feature spire-controller-manager accepts", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
			s.SPIFFEIDTemplate = `{{ $ns := .PodMeta.Namespace }}spiffe://{{ .TrustDomain }}/ns/{{ $ns }}{{ range .PodSpec.Containers }}/{{ .Name }}{{ end }}` +
				`{{ with index .PodMeta.Labels "app" }}/{{ . }}{{ end }}{{ define "x" }}{{ .Name }}{{ end }}/{{ template "x" .NodeMeta }}`
			s.DNSNameTemplates = []string{"{{ .PodMeta.Name }}.{{ .PodMeta.Namespace }}.svc.{{ .ClusterDomain }}", "Web.Example.COM", "*.example.com"}
			s.WorkloadSelectorTemplates = []string{"k8s:sa:{{ .PodSpec.ServiceAccountName }}", "k8s:pod-image:{{ (index .PodSpec.Containers 0).Image }}"}
			s.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}
			s.FederatesWith = []string{"partner.org"}
			s.TTL = metav1.Duration{Duration: time.Hour}
		})},
		{name: "missing map keys are no error", obj: valid(id(`spiffe://{{ .TrustDomain }}/{{ index .PodMeta.Labels "nope" }}{{ .PodMeta.Annotations.nope }}`))},
		{name: "deep fields behind pointers", obj: valid(id(`spiffe://{{ .TrustDomain }}/{{ .PodSpec.SecurityContext.RunAsUser }}/{{ .NodeSpec.ConfigSource.ConfigMap.Name }}`))},
		{name: "trust domain from an action is left to rendering", trustDomain: "example.org",
			obj: valid(id(`spiffe://{{ index .PodMeta.Labels "td" }}/x`))},
		{name: "authority completed by an action is left to rendering", trustDomain: "example.org",
			obj: valid(id(`spiffe://example{{ index .PodMeta.Labels "suffix" }}/x`))},
		{name: "no trust domain given checks none", obj: valid(id("spiffe://other.org/x"))},

		{name: "empty SPIFFE ID template", obj: valid(id("")), wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "required"},
		{name: "template does not parse", obj: valid(id("spiffe://example.org/{{ .PodMeta.Name")),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "parsing"},
		{name: "unknown field", obj: valid(id("spiffe://{{ .TrustDomain }}/{{ .PodMeta.Tier }}")),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "can't evaluate field Tier"},
		{name: "unknown top-level field", obj: valid(id("spiffe://{{ .TrustDomain }}/{{ .Pod.Name }}")),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "can't evaluate field Pod"},
		{name: "unknown function", obj: valid(id("spiffe://{{ .TrustDomain }}/{{ lower .PodMeta.Name }}")),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "not defined"},
		{name: "undefined template", obj: valid(id(`spiffe://{{ .TrustDomain }}/{{ template "nope" }}`)),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "not defined"},
		{name: "endless recursion", obj: valid(id(`{{ define "l" }}{{ template "l" }}{{ end }}spiffe://example.org/{{ template "l" }}`)),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "template calls"},
		{name: "the reported template: a string printed a hundred thousand times", obj: valid(id(`{{ $s := "` + strings.Repeat("x", 2048) + `" }}spiffe://example.org/{{ printf "` +
			strings.Repeat("%s", 100000) + `" ` + strings.Repeat("$s ", 100000) + `}}`)),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "Too long"},
		{name: "printf past the memory budget", obj: valid(id(`{{ $s := "` + strings.Repeat("x", 2048) + `" }}spiffe://example.org/{{ printf "` +
			strings.Repeat("%s", 1000) + `" ` + strings.Repeat("$s ", 1000) + `}}`)),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "would allocate more than"},
		{name: "strings built in a loop past the memory budget in a DNS name", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
			s.DNSNameTemplates = []string{`{{ $s := "` + strings.Repeat("x", 2000) + `" }}{{ range 5000 }}{{ $x := printf "%s" $s }}{{ end }}x.example.com`}
		}), wantFields: []string{"spec.dnsNameTemplates[0]"}, wantDetail: "would allocate more than"},
		{name: "a printf width taken from an argument", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
			s.WorkloadSelectorTemplates = []string{`k8s:x:{{ printf "%[2]*[1]d" 0 999999 }}`}
		}), wantFields: []string{"spec.workloadSelectorTemplates[0]"}, wantDetail: "printf width or precision"},
		{name: "a method that prints the pod", obj: valid(id(`spiffe://example.org/{{ len .PodMeta.String }}`)),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "can't evaluate field String"},
		{name: "the pod's metadata printed is data, left to rendering", obj: valid(id(`spiffe://example.org/{{ .PodMeta }}`))},
		{name: "literal ID outside the trust domain", trustDomain: "example.org", obj: valid(id("spiffe://evil.org/ns/{{ .PodMeta.Namespace }}")),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: `outside trust domain "example.org"`},
		{name: "literal ID with a port", trustDomain: "example.org", obj: valid(id("spiffe://example.org:443/{{ .PodMeta.Name }}")),
			wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "outside trust domain"},
		{name: "not a SPIFFE ID", obj: valid(id("https://{{ .TrustDomain }}/x")), wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "spiffe://"},
		{name: "literal upper-case SPIFFE ID", obj: valid(id("spiffe://EXAMPLE.ORG/x")), wantFields: []string{"spec.spiffeIDTemplate"}, wantDetail: "invalid SPIFFE ID"},
		{name: "literal DNS name SPIRE refuses", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
			s.DNSNameTemplates = []string{"ok.example.com", "-bad.example.com"}
		}),
			wantFields: []string{"spec.dnsNameTemplates[1]"}, wantDetail: "invalid DNS name"},
		{name: "DNS name template with an unknown field", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.DNSNameTemplates = []string{"{{ .PodMeta.Hostname }}"} }),
			wantFields: []string{"spec.dnsNameTemplates[0]"}, wantDetail: "can't evaluate field Hostname"},
		{name: "literal selector without a type", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
			s.WorkloadSelectorTemplates = []string{"k8s:ns:x", "nocolon"}
		}),
			wantFields: []string{"spec.workloadSelectorTemplates[1]"}, wantDetail: "type:value"},
		{name: "reserved pod-uid selector", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
			s.WorkloadSelectorTemplates = []string{`k8s:pod-uid:{{ index .PodMeta.Annotations "uid" }}`}
		}), wantFields: []string{"spec.workloadSelectorTemplates[0]"}, wantDetail: "reserved"},
		{name: "malformed label selectors", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
			s.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
		}), wantFields: []string{"spec.namespaceSelector.matchLabels", "spec.podSelector.matchExpressions[0].operator"}},
		{name: "bad federatesWith", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{"ok.org", "Bad Domain"} }),
			wantFields: []string{"spec.federatesWith[1]"}},
		{name: "negative TTLs", obj: valid(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
			s.TTL, s.JWTTTL = metav1.Duration{Duration: -time.Second}, metav1.Duration{Duration: -time.Second}
		}), wantFields: []string{"spec.ttl", "spec.jwtTtl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateClusterSPIFFEID(tc.obj, tc.trustDomain)
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
