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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

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

func testClusterSPIFFEID(spec spirev1alpha1.ClusterSPIFFEIDSpec) *ClusterSPIFFEID {
	return CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u"}, Spec: spec})
}

func newTestRenderer(t *testing.T, parentIDTemplate string) *Renderer {
	t.Helper()
	r, err := NewRenderer(Settings{TrustDomain: spiffeid.RequireTrustDomainFromString("example.org"), ClusterName: "demo", ClusterDomain: "cluster.local", ParentIDTemplate: parentIDTemplate})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const nsSATemplate = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"

func TestRenderPodEntry(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	clusterSPIFFEID := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:          nsSATemplate,
		DNSNameTemplates:          []string{"{{ .PodMeta.Name }}.{{ .PodMeta.Namespace }}.svc.{{ .ClusterDomain }}", "web.example.com", "web.example.com"},
		WorkloadSelectorTemplates: []string{"k8s:ns:{{ .PodMeta.Namespace }}", "k8s:pod-label:app:{{ index .PodMeta.Labels \"app\" }}"},
		TTL:                       metav1.Duration{Duration: time.Hour},
		JWTTTL:                    metav1.Duration{Duration: 5 * time.Minute},
		FederatesWith:             []string{"spiffe://partner.org", "other.org"},
		Admin:                     true,
		Hint:                      "web",
	})
	got, err := r.PodEntry(clusterSPIFFEID, testPod(), testNode(), nil)
	if err != nil {
		t.Fatalf("PodEntry: %v", err)
	}
	want := &spiretypes.Entry{
		SpiffeId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/ns/production/sa/web-server"},
		ParentId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/spire/agent/k8s_psat/demo/node-uid-1"},
		Selectors: []*spiretypes.Selector{
			{Type: "k8s", Value: "pod-uid:pod-uid-1"}, {Type: "k8s", Value: "ns:production"}, {Type: "k8s", Value: "pod-label:app:web-server"}},
		X509SvidTtl: 3600,
		JwtSvidTtl:  300,
		// Bare trust domain names, as SPIRE keeps them.
		FederatesWith: []string{"partner.org", "other.org"},
		Admin:         true,
		// In template order, deduplicated: the first becomes the SVID's common name.
		DnsNames: []string{"web-0.production.svc.cluster.local", "web.example.com"},
		Hint:     "web",
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("PodEntry mismatch (-want +got):\n%s", diff)
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
		{name: "invalid DNS name", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, DNSNameTemplates: []string{"-web.example.com"}}, want: "invalid DNS name"},
		{name: "bad federatesWith", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, FederatesWith: []string{"Bad Domain"}}, want: "federatesWith[0]"},
		{name: "bad pod selector", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, PodSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}, want: "podSelector"},
		{name: "negative ttl", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, TTL: metav1.Duration{Duration: -time.Second}}, want: "ttl"},
		{name: "unbounded output", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "spiffe://example.org/" + strings.Repeat(`{{ printf "%099d" 0 }}`, 30)}, want: "output longer than"},
		{name: "huge printf width", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: `spiffe://example.org/{{ printf "%0999999999d" 0 }}`}, want: "too large"},
		{name: "infinite recursion", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "{{ define \"loop\" }}{{ template \"loop\" }}{{ end }}spiffe://example.org/{{ template \"loop\" }}"}, want: "template calls"},
		{name: "endless range", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: "spiffe://example.org/x{{ range 1000000000 }}{{ end }}"}, want: "range iterations"},
		{name: "variable doubled past the bound", spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: `{{ $a := "0123456789" }}{{ range 10 }}{{ $a = print $a $a }}{{ end }}spiffe://example.org/{{ len $a }}`}, want: "output longer than"},
		{name: "reserved pod-uid selector", spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate,
			WorkloadSelectorTemplates: []string{"k8s:pod-uid:other"}}, want: "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parentID := tc.parentID
			if parentID == "" {
				parentID = config.DefaultParentIDTemplate
			}
			r := newTestRenderer(t, parentID)
			e, err := r.PodEntry(testClusterSPIFFEID(tc.spec), testPod(), testNode(), nil)
			if err == nil {
				t.Fatalf("rendered %v, want an error", e)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestPodEntriesFallback pins spire-controller-manager's fallback rule: a fallback
// ClusterSPIFFEID is skipped for a pod only once a regular one rendered an entry for it.
func TestPodEntriesFallback(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "production", Labels: map[string]string{"env": "production"}}}
	pod := testPod()
	mk := func(name string, fallback bool, podLabels map[string]string, spiffeID string) *ClusterSPIFFEID {
		return CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: spiffeID, Fallback: fallback,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: podLabels},
		}})
	}
	web := map[string]string{"app": "web-server"}
	other := map[string]string{"app": "other"}
	good := nsSATemplate
	broken := "spiffe://evil.org/{{ .PodMeta.Name }}"
	for _, tc := range []struct {
		name                     string
		all                      []*ClusterSPIFFEID
		wantDeclared, wantFailed string
	}{
		{"regular selects", []*ClusterSPIFFEID{mk("a", false, web, good), mk("b", false, other, good)}, "a", ""},
		{"fallback when nothing else selects", []*ClusterSPIFFEID{mk("fb", true, web, good), mk("b", false, other, good)}, "fb", ""},
		{"fallback yields to a regular one that renders", []*ClusterSPIFFEID{mk("fb", true, web, good+"/fb"), mk("a", false, web, good)}, "a", ""},
		{"fallback applies when the regular one fails to render", []*ClusterSPIFFEID{mk("fb", true, web, good), mk("a", false, web, broken)}, "fb", "a"},
		{"fallback yields when one of two regular ones renders", []*ClusterSPIFFEID{mk("fb", true, web, good+"/fb"), mk("a", false, web, broken), mk("c", false, web, good)}, "c", "a"},
		{"without a node, every one fails", []*ClusterSPIFFEID{mk("fb", true, web, good), mk("a", false, web, good)}, "", "a,fb"},
		{"every fallback applies", []*ClusterSPIFFEID{mk("fb1", true, web, good+"/1"), mk("fb2", true, web, good+"/2")}, "fb1,fb2", ""},
		{"no selector selects everything", []*ClusterSPIFFEID{CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "all"},
			Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: good}})}, "all", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := testNode()
			if strings.HasPrefix(tc.name, "without a node") {
				node = nil
			}
			declared, failures := r.PodEntries(tc.all, pod, ns, node, nil)
			var gotDeclared, gotFailed []string
			for _, d := range declared {
				gotDeclared = append(gotDeclared, d.Declarer.Name)
			}
			for _, f := range failures {
				gotFailed = append(gotFailed, f.ClusterSPIFFEID.Name)
			}
			if strings.Join(gotDeclared, ",") != tc.wantDeclared || strings.Join(gotFailed, ",") != tc.wantFailed {
				t.Errorf("declared by %v, failed %v; want declared by %s, failed %s", gotDeclared, gotFailed, tc.wantDeclared, tc.wantFailed)
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
	if _, err := r.staticEntry(&spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/db",
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
			if _, err := r.staticEntry(&spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestAutoPopulateDNSNames(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	clusterSPIFFEID := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, AutoPopulateDNSNames: true,
		DNSNameTemplates: []string{"web.example.com", "web.production"}})
	e, err := r.PodEntry(clusterSPIFFEID, testPod(), testNode(), []string{"web", "api"})
	if err != nil {
		t.Fatal(err)
	}
	want := "web.example.com web.production api api.production api.production.svc api.production.svc.cluster.local " +
		"web web.production.svc web.production.svc.cluster.local"
	if got := strings.Join(e.DnsNames, " "); got != want {
		t.Errorf("DNS names = %s\nwant        %s (templated first, then sorted service names, no repeats)", got, want)
	}
	noDomain, err := NewRenderer(Settings{TrustDomain: r.trustDomain, ClusterName: "demo", ParentIDTemplate: config.DefaultParentIDTemplate})
	if err != nil {
		t.Fatal(err)
	}
	e, err = noDomain.PodEntry(clusterSPIFFEID, testPod(), testNode(), []string{"web"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.DnsNames, " "); got != "web.example.com web.production web web.production.svc" {
		t.Errorf("without a cluster domain: %s", got)
	}
	off := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate})
	if e, _ := r.PodEntry(off, testPod(), testNode(), []string{"web"}); len(e.DnsNames) != 0 {
		t.Errorf("autoPopulateDNSNames off still added %v", e.DnsNames)
	}
}

func TestStaticEntry(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cse := &spirev1alpha1.ClusterStaticEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "db", CreationTimestamp: created},
		Spec: spirev1alpha1.ClusterStaticEntrySpec{
			SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server",
			Selectors: []string{"unix:uid:999", "k8s:pod-label:app:a:b"}, FederatesWith: []string{"spiffe://partner.org"},
			DNSNames: []string{"db.example.com", "db.example.com", "db"}, X509SVIDTTL: metav1.Duration{Duration: time.Hour},
			Hint: "db", StoreSVID: true,
		},
	}
	got, err := r.StaticEntry(cse)
	if err != nil {
		t.Fatalf("StaticEntry: %v", err)
	}
	wantEntry := &spiretypes.Entry{
		SpiffeId:      &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/db"},
		ParentId:      &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/spire/server"},
		Selectors:     []*spiretypes.Selector{{Type: "unix", Value: "uid:999"}, {Type: "k8s", Value: "pod-label:app:a:b"}},
		X509SvidTtl:   3600,
		FederatesWith: []string{"partner.org"},
		DnsNames:      []string{"db.example.com", "db"},
		Hint:          "db",
		StoreSvid:     true,
	}
	want := &DeclaredEntry{Entry: wantEntry, Key: KeyOf(wantEntry),
		Declarer: Declarer{Kind: KindClusterStaticEntry, Name: "db", Created: created.Time}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("StaticEntry mismatch (-want +got):\n%s", diff)
	}
}

func endpointSlice(namespace, name, service string, targets ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if service != "" {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: service}
	}
	for _, target := range targets {
		ns, pod, _ := strings.Cut(target, "/")
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}})
	}
	return s
}

// withConditions sets the conditions and target UID of every endpoint of a slice.
func withConditions(s *discoveryv1.EndpointSlice, uid types.UID, ready, terminating *bool) *discoveryv1.EndpointSlice {
	for i := range s.Endpoints {
		s.Endpoints[i].TargetRef.UID = uid
		s.Endpoints[i].Conditions = discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}
	}
	return s
}

func TestServicesOfPod(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	for _, tc := range []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   []string
	}{
		{name: "no slices"},
		{name: "sorted and deduplicated", want: []string{"api", "web"}, slices: []*discoveryv1.EndpointSlice{
			endpointSlice("production", "web-1", "web", "production/web-0"),
			endpointSlice("production", "web-2", "web", "production/web-0", "production/web-1"),
			endpointSlice("production", "api-1", "api", "production/web-0"),
		}},
		{name: "slices of other pods", slices: []*discoveryv1.EndpointSlice{endpointSlice("production", "web-1", "web", "production/web-1")}},
		{name: "slice in another namespace", slices: []*discoveryv1.EndpointSlice{endpointSlice("other", "web-1", "web", "production/web-0")}},
		{name: "slice of no Service", slices: []*discoveryv1.EndpointSlice{endpointSlice("production", "web-1", "", "production/web-0")}},
		{name: "target without namespace is the slice's", want: []string{"web"},
			slices: []*discoveryv1.EndpointSlice{endpointSlice("production", "web-1", "web", "/web-0")}},
		// v1 Endpoints, which spire-controller-manager reads, list ready and not-ready pods
		// but leave out terminating ones that are not ready.
		{name: "ready", want: []string{"web"},
			slices: []*discoveryv1.EndpointSlice{withConditions(endpointSlice("production", "web-1", "web", "production/web-0"), "pod-uid-1", yes, no)}},
		{name: "not ready", want: []string{"web"},
			slices: []*discoveryv1.EndpointSlice{withConditions(endpointSlice("production", "web-1", "web", "production/web-0"), "pod-uid-1", no, no)}},
		{name: "terminating, not ready",
			slices: []*discoveryv1.EndpointSlice{withConditions(endpointSlice("production", "web-1", "web", "production/web-0"), "pod-uid-1", no, yes)}},
		{name: "terminating, ready (publishNotReadyAddresses)", want: []string{"web"},
			slices: []*discoveryv1.EndpointSlice{withConditions(endpointSlice("production", "web-1", "web", "production/web-0"), "pod-uid-1", yes, yes)}},
		{name: "an earlier pod of the same name",
			slices: []*discoveryv1.EndpointSlice{withConditions(endpointSlice("production", "web-1", "web", "production/web-0"), "old-uid", yes, no)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ServicesOfPod(tc.slices, testPod())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ServicesOfPod mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodEntries(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "production"}}
	web := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, AutoPopulateDNSNames: true})
	broken := CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "broken"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://evil.org/x"}})
	other := CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}})
	slices := []*discoveryv1.EndpointSlice{endpointSlice("production", "web-1", "web", "production/web-0")}

	declared, failures := r.PodEntries([]*ClusterSPIFFEID{web, broken, other}, testPod(), ns, testNode(), slices)

	wantEntry, err := r.PodEntry(web, testPod(), testNode(), []string{"web"})
	if err != nil {
		t.Fatal(err)
	}
	want := []*DeclaredEntry{NewDeclaredEntry(wantEntry, web.Declarer("pod-uid-1"))}
	if diff := cmp.Diff(want, declared, protocmp.Transform()); diff != "" {
		t.Errorf("declared mismatch (-want +got):\n%s", diff)
	}
	if got := wantEntry.GetDnsNames(); !strings.Contains(strings.Join(got, " "), "web.production.svc.cluster.local") {
		t.Errorf("DNS names %v lack the Service's", got)
	}
	if len(failures) != 1 || failures[0].ClusterSPIFFEID != broken || !strings.Contains(failures[0].Err.Error(), "spiffeIDTemplate") {
		t.Errorf("failures = %+v, want one of %q naming spiffeIDTemplate", failures, broken.Name)
	}
}

func TestPodDeclaresEntries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		want   bool
	}{
		{"running", func(*corev1.Pod) {}, true},
		{"pending on a node", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, true},
		// Not scheduled: it takes part, and fails to render as in spire-controller-manager.
		{"not scheduled", func(p *corev1.Pod) { p.Spec.NodeName = "" }, true},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			tc.mutate(pod)
			if got := PodDeclaresEntries(pod); got != tc.want {
				t.Errorf("PodDeclaresEntries = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDNSNamesAsSPIREAccepts pins DNS name validation to SPIRE 1.15.3's own
// (x509util.ValidateLabel): what SPIRE takes renders, upper case included, and what it refuses
// does not.
func TestDNSNamesAsSPIREAccepts(t *testing.T) {
	for name, wantOK := range map[string]bool{
		"web.example.com": true, "Web.Example.COM": true, "*.Example.com": true, "xn--ls8h.org": true,
		"a-hello.com": true, "com": true, "___.com": true,
		"": false, ".": false, "example.com.": false, "-hello.com": false, "*.foo.*.bar": false,
		"foo.*.bar": false, " ": false, "💩.com": false, "example.💩": false, strings.Repeat("a", 64) + ".com": false,
	} {
		err := validateDNSName(name)
		if (err == nil) != wantOK {
			t.Errorf("validateDNSName(%q) = %v, want accepted %v", name, err, wantOK)
		}
	}
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	e, err := r.PodEntry(testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate,
		DNSNameTemplates: []string{"{{ .PodMeta.Name }}.Example.COM"}}), testPod(), testNode(), nil)
	if err != nil || !slices.Equal(e.GetDnsNames(), []string{"web-0.Example.COM"}) {
		t.Errorf("rendered DNS names %v (err %v), want [web-0.Example.COM]", e.GetDnsNames(), err)
	}
}

// TestTemplatesAcceptWhatSCMAccepts renders templates that spire-controller-manager renders:
// the whole text/template language, with its builtin functions.
func TestTemplatesAcceptWhatSCMAccepts(t *testing.T) {
	pod := testPod()
	pod.Labels["tier"] = "front"
	pod.Spec.Containers = []corev1.Container{{Name: "app"}, {Name: "sidecar"}}
	for _, tc := range []struct{ name, template, want string }{
		{"variables", `{{ $ns := .PodMeta.Namespace }}spiffe://{{ .TrustDomain }}/ns/{{ $ns }}`, "spiffe://example.org/ns/production"},
		{"range with index", `spiffe://{{ .TrustDomain }}/c{{ range $i, $c := .PodSpec.Containers }}/{{ $i }}-{{ $c.Name }}{{ end }}`,
			"spiffe://example.org/c/0-app/1-sidecar"},
		{"range over labels, sorted", `spiffe://{{ .TrustDomain }}/l{{ range $k, $v := .PodMeta.Labels }}/{{ $k }}.{{ $v }}{{ end }}`,
			"spiffe://example.org/l/app.web-server/tier.front"},
		{"with and else", `spiffe://{{ .TrustDomain }}/{{ with index .PodMeta.Labels "missing" }}{{ . }}{{ else }}none{{ end }}`, "spiffe://example.org/none"},
		{"define and template", `{{ define "sa" }}{{ .PodSpec.ServiceAccountName }}{{ end }}spiffe://{{ .TrustDomain }}/sa/{{ template "sa" . }}`,
			"spiffe://example.org/sa/web-server"},
		{"builtins", `spiffe://{{ .TrustDomain }}/{{ printf "%s-%d" (slice .PodMeta.Name 0 3) (len .PodSpec.Containers) }}{{ if and (eq .PodMeta.Namespace "production") (not .PodSpec.HostNetwork) }}/p{{ end }}`,
			"spiffe://example.org/web-2/p"},
		{"urlquery and print", `spiffe://{{ .TrustDomain }}/{{ print "a" 1 | urlquery }}`, "spiffe://example.org/a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRenderer(t, config.DefaultParentIDTemplate)
			e, err := r.PodEntry(testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tc.template}), pod, testNode(), nil)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if got := SPIFFEIDString(e.GetSpiffeId()); got != tc.want {
				t.Errorf("SPIFFE ID = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestParentIDTemplateSeesOnlyTheNode: spire-controller-manager renders the parent ID before
// it adds the pod to the template data, so a parent ID template cannot use the pod.
func TestParentIDTemplateSeesOnlyTheNode(t *testing.T) {
	r := newTestRenderer(t, "spiffe://{{ .TrustDomain }}/agent/{{ .PodMeta.Name }}")
	if e, err := r.PodEntry(testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate}), testPod(), testNode(), nil); err == nil {
		t.Errorf("rendered parent ID %s from the pod's name, want an error", SPIFFEIDString(e.GetParentId()))
	}
}
