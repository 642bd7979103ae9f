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

package entry

import (
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "production", UID: "pod-uid-1",
			Labels: map[string]string{"app": "web-server"}},
		Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "web-server"},
	}
}

func testNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid-1"}}
}

func testIdentity(spec spirev1alpha1.ClusterSPIFFEIDSpec) *podIdentity {
	return compileIdentity(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "csid", UID: "u"}, Spec: spec})
}

func newTestRenderer(t *testing.T, parentIDTemplate string) *renderer {
	t.Helper()
	r, err := newRenderer(spiffeid.RequireTrustDomainFromString("example.org"), "demo", "cluster.local", parentIDTemplate)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const nsSATemplate = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"

func TestRenderPodEntry(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	id := testIdentity(spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:          nsSATemplate,
		DNSNameTemplates:          []string{"{{ .PodMeta.Name }}.{{ .PodMeta.Namespace }}.svc.{{ .ClusterDomain }}", "web.example.com", "web.example.com"},
		WorkloadSelectorTemplates: []string{"k8s:ns:{{ .PodMeta.Namespace }}", "k8s:pod-label:app:{{ index .PodMeta.Labels \"app\" }}"},
		TTL:                       metav1.Duration{Duration: time.Hour},
		JWTTTL:                    metav1.Duration{Duration: 5 * time.Minute},
		FederatesWith:             []string{"spiffe://partner.org", "other.org"},
		Admin:                     true,
		Hint:                      "web",
	})
	e, err := r.renderPodEntry(id, testPod(), testNode(), nil)
	if err != nil {
		t.Fatalf("renderPodEntry: %v", err)
	}
	if got := spiffeIDString(e.SpiffeId); got != "spiffe://example.org/ns/production/sa/web-server" {
		t.Errorf("SPIFFE ID = %s", got)
	}
	if got := spiffeIDString(e.ParentId); got != "spiffe://example.org/spire/agent/k8s_psat/demo/node-uid-1" {
		t.Errorf("parent ID = %s", got)
	}
	var selectors []string
	for _, s := range e.Selectors {
		selectors = append(selectors, s.Type+":"+s.Value)
	}
	if got, want := strings.Join(selectors, " "), "k8s:pod-uid:pod-uid-1 k8s:ns:production k8s:pod-label:app:web-server"; got != want {
		t.Errorf("selectors = %s, want %s", got, want)
	}
	if got, want := strings.Join(e.DnsNames, " "), "web-0.production.svc.cluster.local web.example.com"; got != want {
		t.Errorf("DNS names = %s, want %s (in template order, deduplicated)", got, want)
	}
	if e.X509SvidTtl != 3600 || e.JwtSvidTtl != 300 || !e.Admin || e.Hint != "web" {
		t.Errorf("copied fields wrong: %v", e)
	}
	if got := strings.Join(e.FederatesWith, ","); got != "partner.org,other.org" {
		t.Errorf("federatesWith = %s, want bare trust domain names", got)
	}
}

func TestRenderFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     spirev1alpha1.ClusterSPIFFEIDSpec
		parentID string
		want     string
	}{
		{name: "SPIFFE ID outside the trust domain", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://evil.org/x"}, want: "outside trust domain"},
		{name: "SPIFFE ID from pod data outside the trust domain",
			spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ index .PodMeta.Labels \"app\" }}.org/x"}, want: "outside trust domain"},
		{name: "parent ID outside the trust domain", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate},
			parentID: "spiffe://evil.org/agent", want: "outside trust domain"},
		{name: "not a SPIFFE ID", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "https://example.org/x"}, want: "invalid SPIFFE ID"},
		{name: "missing value renders an invalid ID", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://example.org/{{ .PodMeta.Labels.missing }}"}, want: "invalid SPIFFE ID"},
		{name: "template does not parse", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://example.org/{{ .Nope"}, want: "parsing spiffeIDTemplate"},
		{name: "template fails to execute", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://example.org/{{ .PodMeta.NoSuchField }}"}, want: "rendering spiffeIDTemplate"},
		{name: "selector without colon", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, WorkloadSelectorTemplates: []string{"k8s"}}, want: "type:value"},
		{name: "selector with empty value", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, WorkloadSelectorTemplates: []string{"k8s:"}}, want: "empty value"},
		{name: "invalid DNS name", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, DNSNameTemplates: []string{"Not A Name"}}, want: "invalid DNS name"},
		{name: "bad federatesWith", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, FederatesWith: []string{"Bad Domain"}}, want: "federatesWith[0]"},
		{name: "bad pod selector", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, PodSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}, want: "podSelector"},
		{name: "negative ttl", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, TTL: metav1.Duration{Duration: -time.Second}}, want: "ttl"},
		{name: "unbounded output", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "spiffe://example.org/" + strings.Repeat(`{{ printf "%099d" 0 }}`, 30)}, want: "output longer than"},
		{name: "huge printf width", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: `spiffe://example.org/{{ printf "%0999999999d" 0 }}`}, want: "too large"},
		{name: "infinite recursion", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "{{ define \"loop\" }}{{ template \"loop\" }}{{ end }}spiffe://example.org/{{ template \"loop\" }}"}, want: "not allowed"},
		{name: "range", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "spiffe://example.org/{{ range .PodMeta.Labels }}x{{ end }}"}, want: "range is not allowed"},
		{name: "variables", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "spiffe://example.org/{{ $x := .PodMeta.Name }}{{ $x }}"}, want: "variables are not allowed"},
		{name: "reserved pod-uid selector", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate,
			WorkloadSelectorTemplates: []string{"k8s:pod-uid:other"}}, want: "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parentID := tc.parentID
			if parentID == "" {
				parentID = config.DefaultParentIDTemplate
			}
			r := newTestRenderer(t, parentID)
			e, err := r.renderPodEntry(testIdentity(tc.spec), testPod(), testNode(), nil)
			if err == nil {
				t.Fatalf("rendered %v, want an error", e)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestApplicableIdentities(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "production", Labels: map[string]string{"env": "production"}}}
	pod := testPod()
	mk := func(name string, fallback bool, podLabels map[string]string) *podIdentity {
		id := compileIdentity(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: nsSATemplate, Fallback: fallback,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: podLabels},
		}})
		return id
	}
	web := map[string]string{"app": "web-server"}
	other := map[string]string{"app": "other"}
	for _, tc := range []struct {
		name string
		ids  []*podIdentity
		want string
	}{
		{"regular selects", []*podIdentity{mk("a", false, web), mk("b", false, other)}, "a"},
		{"fallback only when nothing else applies", []*podIdentity{mk("fb", true, web), mk("b", false, other)}, "fb"},
		{"fallback yields to a regular one", []*podIdentity{mk("fb", true, web), mk("a", false, web)}, "a"},
		{"no selector selects everything", []*podIdentity{compileIdentity(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "all"}})}, "all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, id := range applicableIdentities(tc.ids, ns, pod) {
				got = append(got, id.name)
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("applicable = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestRenderStaticEntryRejects(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	valid := func() spirev1alpha1.ClusterStaticEntrySpec {
		return spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server",
			Selectors: []string{"unix:uid:999"}}
	}
	if _, err := r.renderStaticEntry(&spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/db",
		ParentID: "spiffe://example.org/spire/server", Selectors: []string{"k8s:pod-label:app:a:b"}}); err != nil {
		t.Fatalf("valid spec rejected: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*spirev1alpha1.ClusterStaticEntrySpec)
		want   string
	}{
		{"bad SPIFFE ID", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.SPIFFEID = "spiffe://example.org/a b" }, "spiffeID"},
		{"SPIFFE ID of another trust domain", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.SPIFFEID = "spiffe://other.org/db" }, "spiffeID"},
		{"parent ID of another trust domain", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.ParentID = "spiffe://other.org/x" }, "parentID"},
		{"no selectors", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.Selectors = nil }, "selectors"},
		{"selector without colon", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{"unix"} }, "selectors[0]"},
		{"selector with empty type", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{":x"} }, "selectors[0]"},
		{"reserved pod-uid selector", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{"k8s:pod-uid:123"} }, "reserved"},
		{"bad federatesWith", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.FederatesWith = []string{"UPPER.org"} }, "federatesWith[0]"},
		{"bad DNS name", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.DNSNames = []string{"-bad-"} }, "dnsNames[0]"},
		{"negative TTL", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.X509SVIDTTL.Duration = -time.Second }, "x509SVIDTTL"},
		{"negative JWT TTL", func(s *spirev1alpha1.ClusterStaticEntrySpec) { s.JWTSVIDTTL.Duration = -time.Second }, "jwtSVIDTTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := valid()
			tc.mutate(&spec)
			if _, err := r.renderStaticEntry(&spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestAutoPopulateDNSNames(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	id := testIdentity(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, AutoPopulateDNSNames: true,
		DNSNameTemplates: []string{"web.example.com", "web.production"}})
	e, err := r.renderPodEntry(id, testPod(), testNode(), []string{"web", "api"})
	if err != nil {
		t.Fatal(err)
	}
	want := "web.example.com web.production api api.production api.production.svc api.production.svc.cluster.local " +
		"web web.production.svc web.production.svc.cluster.local"
	if got := strings.Join(e.DnsNames, " "); got != want {
		t.Errorf("DNS names = %s\nwant        %s (templated first, then sorted service names, no repeats)", got, want)
	}
	noDomain, err := newRenderer(r.trustDomain, "demo", "", config.DefaultParentIDTemplate)
	if err != nil {
		t.Fatal(err)
	}
	e, err = noDomain.renderPodEntry(id, testPod(), testNode(), []string{"web"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.DnsNames, " "); got != "web.example.com web.production web web.production.svc" {
		t.Errorf("without a cluster domain: %s", got)
	}
	off := testIdentity(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate})
	if e, _ := r.renderPodEntry(off, testPod(), testNode(), []string{"web"}); len(e.DnsNames) != 0 {
		t.Errorf("autoPopulateDNSNames off still added %v", e.DnsNames)
	}
}
