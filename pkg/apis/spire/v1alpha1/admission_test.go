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
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	"github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// errTestBug marks a failure of the test's own set-up of a case, never a rejection.
var errTestBug = errors.New("test bug")

// TestAdmissionRejectsMalformedResources submits malformed resources to the real apiserver with
// our CRDs: what can be checked statically is refused at admission, with a message naming the
// field, and valid resources are accepted. Resources are sent both through the typed client
// and as raw JSON, the way kubectl sends a hand-written manifest (with strict field
// validation, kubectl's default), so wrong types, missing fields and typos are covered too.
// At the end only the valid resources are stored, as they were created.
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
	long := func(prefix string, n int, suffix string) string {
		return prefix + strings.Repeat("a", n-len(prefix)-len(suffix)) + suffix
	}

	// Typed creates, each from a valid spec with one thing broken.
	clusterSPIFFEID := func(mutate func(*v1alpha1.ClusterSPIFFEIDSpec)) func(string) error {
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
	clusterSPIFFEIDMeta := func(mutate func(*metav1.ObjectMeta)) func(string) error {
		return func(name string) error {
			m := meta(name)
			mutate(&m)
			_, err := api.ClusterSPIFFEIDs().Create(ctx, &v1alpha1.ClusterSPIFFEID{ObjectMeta: m,
				Spec: v1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/x"}}, metav1.CreateOptions{})
			return err
		}
	}

	// Raw creates: a manifest as JSON, decoded only by the apiserver, with the strict field
	// validation kubectl asks for.
	post := func(resource string, body []byte) error {
		return api.RESTClient().Post().Resource(resource).Param("fieldValidation", "Strict").
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
	}
	type object = map[string]any
	raw := func(resource, kind string, spec func() object, mutate func(obj, spec object)) func(string) error {
		return func(name string) error {
			s := spec()
			obj := object{"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": kind, "metadata": object{"name": name}, "spec": s}
			mutate(obj, s)
			body, err := json.Marshal(obj)
			if err != nil {
				return fmt.Errorf("%w: %w", errTestBug, err)
			}
			return post(resource, body)
		}
	}
	clusterSPIFFEIDSpec := func() object { return object{"spiffeIDTemplate": "spiffe://{{ .TrustDomain }}/x"} }
	cseSpec := func() object {
		return object{"spiffeID": "spiffe://example.org/db", "parentID": "spiffe://example.org/spire/server", "selectors": []any{"unix:uid:999"}}
	}
	cftdSpec := func() object {
		return object{"trustDomain": "partner.org", "bundleEndpointURL": "https://partner.org/bundle",
			"bundleEndpointProfile": object{"type": "https_web"}}
	}
	rawClusterSPIFFEID := func(mutate func(spec object)) func(string) error {
		return raw("clusterspiffeids", "ClusterSPIFFEID", clusterSPIFFEIDSpec, func(_, s object) { mutate(s) })
	}
	rawCSE := func(mutate func(spec object)) func(string) error {
		return raw("clusterstaticentries", "ClusterStaticEntry", cseSpec, func(_, s object) { mutate(s) })
	}
	rawCFTD := func(mutate func(spec object)) func(string) error {
		return raw("clusterfederatedtrustdomains", "ClusterFederatedTrustDomain", cftdSpec, func(_, s object) { mutate(s) })
	}
	selector := func(expr object) object { return object{"matchExpressions": []any{expr}} }
	// text posts a manifest verbatim, for what json.Marshal cannot produce.
	text := func(resource, format string) func(string) error {
		return func(name string) error { return post(resource, []byte(fmt.Sprintf(format, name))) }
	}

	// Updates that would break one of the valid resources created first.
	updateClusterSPIFFEID := func(name string, mutate func(*v1alpha1.ClusterSPIFFEIDSpec)) func(string) error {
		return func(string) error {
			cur, err := api.ClusterSPIFFEIDs().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%w: %w", errTestBug, err)
			}
			mutate(&cur.Spec)
			_, err = api.ClusterSPIFFEIDs().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
	}
	updateCSE := func(name string, mutate func(*v1alpha1.ClusterStaticEntrySpec)) func(string) error {
		return func(string) error {
			cur, err := api.ClusterStaticEntries().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%w: %w", errTestBug, err)
			}
			mutate(&cur.Spec)
			_, err = api.ClusterStaticEntries().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
	}
	updateCFTD := func(name string, mutate func(*v1alpha1.ClusterFederatedTrustDomainSpec)) func(string) error {
		return func(string) error {
			cur, err := api.ClusterFederatedTrustDomains().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%w: %w", errTestBug, err)
			}
			mutate(&cur.Spec)
			_, err = api.ClusterFederatedTrustDomains().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
	}

	const (
		validClusterSPIFFEID = "valid-clusterspiffeid"
		validCSE             = "valid-clusterstaticentry"
		validWeb             = "valid-https-web"
		validSPIFFE          = "valid-https-spiffe"
		partnerServer        = "spiffe://partner.org/spire/server"
	)
	cases := []struct {
		name   string
		create func(name string) error
		field  string // "" means the resource must be accepted
	}{
		// The valid resources, first: the update cases below try to break them.
		{validClusterSPIFFEID, clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.TTL = dur("1h")
			s.FederatesWith = []string{"spiffe://partner.org", "other.org"}
		}), ""},
		{validCSE, cse(func(*v1alpha1.ClusterStaticEntrySpec) {}), ""},
		{validWeb, cftd(func(*v1alpha1.ClusterFederatedTrustDomainSpec) {}), ""},
		{validSPIFFE, cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.TrustDomain = "spiffe-profile.org"
			s.BundleEndpointProfile = v1alpha1.BundleEndpointProfile{Type: v1alpha1.HTTPSSPIFFEProfileType, EndpointSPIFFEID: "spiffe://spiffe-profile.org/spire/server"}
		}), ""},

		// ClusterSPIFFEID, typed.
		{"SPIFFE ID template not spiffe://", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "https://x/{{ .PodMeta.Name }}" }), "spec.spiffeIDTemplate"},
		{"empty SPIFFE ID template", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "" }), "spec.spiffeIDTemplate"},
		{"SPIFFE ID template without scheme", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.SPIFFEIDTemplate = "{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}"
		}), "spec.spiffeIDTemplate"},
		{"SPIFFE ID template http", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "http://{{ .TrustDomain }}/x" }), "spec.spiffeIDTemplate"},
		{"SPIFFE ID template upper-case scheme", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "SPIFFE://{{ .TrustDomain }}/x" }), "spec.spiffeIDTemplate"},
		{"SPIFFE ID template leading space", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = " spiffe://{{ .TrustDomain }}/x" }), "spec.spiffeIDTemplate"},
		{"SPIFFE ID template one slash", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "spiffe:/{{ .TrustDomain }}/x" }), "spec.spiffeIDTemplate"},
		{"SPIFFE ID template no colon", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "spiffe//{{ .TrustDomain }}/x" }), "spec.spiffeIDTemplate"},
		{"SPIFFE ID template starting with a template", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.SPIFFEIDTemplate = `{{ "spiffe://" }}{{ .TrustDomain }}/x`
		}), "spec.spiffeIDTemplate"},
		{"negative ttl", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.TTL = dur("-1h") }), "spec.ttl"},
		{"negative jwtTtl", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.JWTTTL = dur("-5m") }), "spec.jwtTtl"},
		{"bad federatesWith", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{"Partner Org"} }), "spec.federatesWith[0]"},
		{"upper-case federatesWith", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{"Partner.org"} }), "spec.federatesWith[0]"},
		{"federatesWith with a path", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{"spiffe://partner.org/x"} }), "spec.federatesWith[0]"},
		{"federatesWith https URL", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{"https://partner.org"} }), "spec.federatesWith[0]"},
		{"federatesWith with a port", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{"partner.org:8443"} }), "spec.federatesWith[0]"},
		{"empty federatesWith", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{""} }), "spec.federatesWith[0]"},
		{"too long federatesWith", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{long("", 256, ".org")} }), "spec.federatesWith[0]"},
		{"second federatesWith bad", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.FederatesWith = []string{"partner.org", "spiffe://"} }), "spec.federatesWith[1]"},
		{"bad label selector operator", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a"}}}
		}), "spec.podSelector.matchExpressions[0].operator"},
		{"pod selector operator Equals", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Equals", Values: []string{"b"}}}}
		}), "spec.podSelector.matchExpressions[0].operator"},
		{"pod selector operator lower-case", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "in", Values: []string{"b"}}}}
		}), "spec.podSelector.matchExpressions[0].operator"},
		{"namespace selector bad operator", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "!="}}}
		}), "spec.namespaceSelector.matchExpressions[0].operator"},
		{"namespace selector second expression bad", clusterSPIFFEID(func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: metav1.LabelSelectorOpExists}, {Key: "tier", Operator: "Matches", Values: []string{"x"}}}}
		}), "spec.namespaceSelector.matchExpressions[1].operator"},
		{"invalid resource name", clusterSPIFFEIDMeta(func(m *metav1.ObjectMeta) { m.Name = "Bad_Name" }), "metadata.name"},
		{"too long resource name", clusterSPIFFEIDMeta(func(m *metav1.ObjectMeta) { m.Name = long("x", 254, "") }), "metadata.name"},
		{"invalid label key", clusterSPIFFEIDMeta(func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"bad key": "x"} }), "metadata.labels"},
		{"invalid label value", clusterSPIFFEIDMeta(func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"app": "not valid!"} }), "metadata.labels"},
		{"invalid finalizer", clusterSPIFFEIDMeta(func(m *metav1.ObjectMeta) { m.Finalizers = []string{"not a finalizer"} }), "metadata.finalizers"},

		// ClusterSPIFFEID, raw.
		{"ClusterSPIFFEID without spec", raw("clusterspiffeids", "ClusterSPIFFEID", clusterSPIFFEIDSpec, func(o, _ object) { delete(o, "spec") }), "spec: Required value"},
		{"ClusterSPIFFEID without template", rawClusterSPIFFEID(func(s object) { delete(s, "spiffeIDTemplate") }), "spec.spiffeIDTemplate"},
		{"template as a number", rawClusterSPIFFEID(func(s object) { s["spiffeIDTemplate"] = 42 }), "spec.spiffeIDTemplate"},
		{"template as a list", rawClusterSPIFFEID(func(s object) { s["spiffeIDTemplate"] = []any{"spiffe://example.org/x"} }), "spec.spiffeIDTemplate"},
		{"ttl in seconds", rawClusterSPIFFEID(func(s object) { s["ttl"] = 3600 }), "spec.ttl"},
		{"jwtTtl as a boolean", rawClusterSPIFFEID(func(s object) { s["jwtTtl"] = true }), "spec.jwtTtl"},
		{"negative ttl string", rawClusterSPIFFEID(func(s object) { s["ttl"] = "-30s" }), "spec.ttl"},
		// Strings Go cannot parse as durations would make every list of the kind fail to
		// decode, stalling the controller for all resources: they must never get in.
		{"ttl in days", rawClusterSPIFFEID(func(s object) { s["ttl"] = "1d" }), "spec.ttl"},
		{"ttl not a duration", rawClusterSPIFFEID(func(s object) { s["ttl"] = "abc" }), "spec.ttl"},
		{"ttl overflowing a duration", rawClusterSPIFFEID(func(s object) { s["ttl"] = "9999999999999h" }), "spec.ttl"},
		{"jwtTtl with a space", rawClusterSPIFFEID(func(s object) { s["jwtTtl"] = "5 m" }), "spec.jwtTtl"},
		{"jwtTtl without a unit", rawClusterSPIFFEID(func(s object) { s["jwtTtl"] = "300" }), "spec.jwtTtl"},
		{"admin as a string", rawClusterSPIFFEID(func(s object) { s["admin"] = "yes" }), "spec.admin"},
		{"fallback as a string", rawClusterSPIFFEID(func(s object) { s["fallback"] = "true" }), "spec.fallback"},
		{"hint as a number", rawClusterSPIFFEID(func(s object) { s["hint"] = 7 }), "spec.hint"},
		{"className as a list", rawClusterSPIFFEID(func(s object) { s["className"] = []any{"blue"} }), "spec.className"},
		{"federatesWith as a string", rawClusterSPIFFEID(func(s object) { s["federatesWith"] = "partner.org" }), "spec.federatesWith"},
		{"dnsNameTemplates as a string", rawClusterSPIFFEID(func(s object) { s["dnsNameTemplates"] = "{{ .PodMeta.Name }}.svc" }), "spec.dnsNameTemplates"},
		{"workloadSelectorTemplates as a map", rawClusterSPIFFEID(func(s object) { s["workloadSelectorTemplates"] = object{"k8s": "ns:x"} }), "spec.workloadSelectorTemplates"},
		{"workload selector template as a number", rawClusterSPIFFEID(func(s object) { s["workloadSelectorTemplates"] = []any{1} }), "spec.workloadSelectorTemplates[0]"},
		{"podSelector as a string", rawClusterSPIFFEID(func(s object) { s["podSelector"] = "app=web" }), "spec.podSelector"},
		{"matchLabels value a number", rawClusterSPIFFEID(func(s object) { s["podSelector"] = object{"matchLabels": object{"replicas": 3}} }), "spec.podSelector.matchLabels.replicas"},
		{"matchLabels as a list", rawClusterSPIFFEID(func(s object) { s["namespaceSelector"] = object{"matchLabels": []any{"env=prod"}} }), "spec.namespaceSelector.matchLabels"},
		{"matchExpression without key", rawClusterSPIFFEID(func(s object) { s["podSelector"] = selector(object{"operator": "Exists"}) }), "spec.podSelector.matchExpressions[0].key"},
		{"matchExpression without operator", rawClusterSPIFFEID(func(s object) { s["podSelector"] = selector(object{"key": "app"}) }), "spec.podSelector.matchExpressions[0].operator"},
		{"matchExpression values a string", rawClusterSPIFFEID(func(s object) {
			s["namespaceSelector"] = selector(object{"key": "env", "operator": "In", "values": "prod"})
		}), "spec.namespaceSelector.matchExpressions[0].values"},
		{"misspelt spiffeIdTemplate", rawClusterSPIFFEID(func(s object) {
			delete(s, "spiffeIDTemplate")
			s["spiffeIdTemplate"] = "spiffe://{{ .TrustDomain }}/x"
		}), "spiffeIdTemplate"},
		{"unknown spec field", rawClusterSPIFFEID(func(s object) { s["parentIDTemplate"] = "spiffe://{{ .TrustDomain }}/node" }), "spec.parentIDTemplate"},
		{"unknown selector field", rawClusterSPIFFEID(func(s object) { s["podSelector"] = object{"matchLabel": object{"app": "web"}} }), "spec.podSelector.matchLabel"},
		{"unknown top-level field", raw("clusterspiffeids", "ClusterSPIFFEID", clusterSPIFFEIDSpec, func(o, _ object) { o["specs"] = object{} }), "specs"},
		{"duplicate template field", text("clusterspiffeids", `{"apiVersion":"spire.spiffe.io/v1alpha1","kind":"ClusterSPIFFEID",`+
			`"metadata":{"name":%q},"spec":{"spiffeIDTemplate":"spiffe://{{ .TrustDomain }}/a","spiffeIDTemplate":"spiffe://{{ .TrustDomain }}/b"}}`),
			"spiffeIDTemplate"},
		{"update ClusterSPIFFEID to an http template", updateClusterSPIFFEID(validClusterSPIFFEID, func(s *v1alpha1.ClusterSPIFFEIDSpec) {
			s.SPIFFEIDTemplate = "http://{{ .TrustDomain }}/x"
		}), "spec.spiffeIDTemplate"},
		{"update ClusterSPIFFEID to a negative ttl", updateClusterSPIFFEID(validClusterSPIFFEID, func(s *v1alpha1.ClusterSPIFFEIDSpec) { s.TTL = dur("-1m") }), "spec.ttl"},

		// ClusterStaticEntry, typed.
		{"static SPIFFE ID not spiffe://", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.SPIFFEID = "example.org/db" }), "spec.spiffeID"},
		{"empty static SPIFFE ID", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.SPIFFEID = "" }), "spec.spiffeID"},
		{"static SPIFFE ID http", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.SPIFFEID = "http://example.org/db" }), "spec.spiffeID"},
		{"static SPIFFE ID upper-case scheme", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.SPIFFEID = "Spiffe://example.org/db" }), "spec.spiffeID"},
		{"static parent ID not spiffe://", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.ParentID = "/spire/server" }), "spec.parentID"},
		{"empty static parent ID", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.ParentID = "" }), "spec.parentID"},
		{"static parent ID https", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.ParentID = "https://example.org/spire/server" }), "spec.parentID"},
		{"no selectors", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{} }), "spec.selectors"},
		{"null selectors", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = nil }), "spec.selectors"},
		{"selector without colon", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{"unix"} }), "spec.selectors[0]"},
		{"selector with empty value", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{"unix:"} }), "spec.selectors[0]"},
		{"selector with empty type", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{":uid:0"} }), "spec.selectors[0]"},
		{"empty selector", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{""} }), "spec.selectors[0]"},
		{"too long selector", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{long("unix:path:", 1025, "")} }), "spec.selectors[0]"},
		{"second selector bad", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{"unix:uid:0", "k8s"} }), "spec.selectors[1]"},
		{"negative x509SVIDTTL", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.X509SVIDTTL = dur("-1s") }), "spec.x509SVIDTTL"},
		{"negative jwtSVIDTTL", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.JWTSVIDTTL = dur("-1h") }), "spec.jwtSVIDTTL"},
		{"bad static federatesWith", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.FederatesWith = []string{"a b"} }), "spec.federatesWith[0]"},
		{"static federatesWith upper-case", cse(func(s *v1alpha1.ClusterStaticEntrySpec) { s.FederatesWith = []string{"spiffe://Partner.org"} }), "spec.federatesWith[0]"},

		// ClusterStaticEntry, raw.
		{"ClusterStaticEntry without spec", raw("clusterstaticentries", "ClusterStaticEntry", cseSpec, func(o, _ object) { delete(o, "spec") }), "spec: Required value"},
		{"static entry without spiffeID", rawCSE(func(s object) { delete(s, "spiffeID") }), "spec.spiffeID"},
		{"static entry without parentID", rawCSE(func(s object) { delete(s, "parentID") }), "spec.parentID"},
		{"selectors as a string", rawCSE(func(s object) { s["selectors"] = "unix:uid:999" }), "spec.selectors"},
		{"selector as a map", rawCSE(func(s object) { s["selectors"] = []any{object{"type": "unix", "value": "uid:999"}} }), "spec.selectors[0]"},
		{"spiffeID as a map", rawCSE(func(s object) { s["spiffeID"] = object{"trustDomain": "example.org", "path": "/db"} }), "spec.spiffeID"},
		{"x509SVIDTTL in seconds", rawCSE(func(s object) { s["x509SVIDTTL"] = 3600 }), "spec.x509SVIDTTL"},
		{"x509SVIDTTL not a duration", rawCSE(func(s object) { s["x509SVIDTTL"] = "soon" }), "spec.x509SVIDTTL"},
		{"jwtSVIDTTL in weeks", rawCSE(func(s object) { s["jwtSVIDTTL"] = "2w" }), "spec.jwtSVIDTTL"},
		{"storeSVID as a string", rawCSE(func(s object) { s["storeSVID"] = "yes" }), "spec.storeSVID"},
		{"downstream as a number", rawCSE(func(s object) { s["downstream"] = 1 }), "spec.downstream"},
		{"dnsNames as a string", rawCSE(func(s object) { s["dnsNames"] = "db.example.org" }), "spec.dnsNames"},
		{"misspelt parentId", rawCSE(func(s object) {
			delete(s, "parentID")
			s["parentId"] = "spiffe://example.org/spire/server"
		}), "parentId"},
		{"misspelt ttl field", rawCSE(func(s object) { s["ttl"] = "1h" }), "spec.ttl"},
		{"update ClusterStaticEntry to no selectors", updateCSE(validCSE, func(s *v1alpha1.ClusterStaticEntrySpec) { s.Selectors = []string{} }), "spec.selectors"},
		{"update ClusterStaticEntry to a bare parent ID", updateCSE(validCSE, func(s *v1alpha1.ClusterStaticEntrySpec) {
			s.ParentID = "example.org/spire/server"
		}), "spec.parentID"},

		// ClusterFederatedTrustDomain, typed.
		{"http bundle URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "http://partner.org/bundle" }), "spec.bundleEndpointURL"},
		{"bundle URL without host", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "https:///bundle" }), "spec.bundleEndpointURL"},
		{"bundle URL with userinfo", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "https://user:pw@partner.org/bundle"
		}), "spec.bundleEndpointURL"},
		{"bundle URL with user only", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "https://bot@partner.org/bundle"
		}), "spec.bundleEndpointURL"},
		{"not a URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "partner.org" }), "spec.bundleEndpointURL"},
		{"empty bundle URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "" }), "spec.bundleEndpointURL"},
		{"ftp bundle URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "ftp://partner.org/bundle" }), "spec.bundleEndpointURL"},
		{"spiffe bundle URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "spiffe://partner.org/bundle" }), "spec.bundleEndpointURL"},
		{"scheme-only bundle URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "https://" }), "spec.bundleEndpointURL"},
		{"bundle URL with a space", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "https://partner org/bundle" }), "spec.bundleEndpointURL"},
		{"relative bundle URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = "/bundle" }), "spec.bundleEndpointURL"},
		{"too long bundle URL", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = long("https://partner.org/", 2049, "")
		}), "spec.bundleEndpointURL"},
		{"bad trust domain", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "Partner.Org" }), "spec.trustDomain"},
		{"empty trust domain", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "" }), "spec.trustDomain"},
		{"trust domain with a path", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "partner.org/x" }), "spec.trustDomain"},
		{"trust domain with a port", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "partner.org:8443" }), "spec.trustDomain"},
		{"trust domain with a space", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = "partner org" }), "spec.trustDomain"},
		{"too long trust domain", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.TrustDomain = long("", 256, ".org") }), "spec.trustDomain"},
		{"unknown profile", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointProfile.Type = "https_other" }), "spec.bundleEndpointProfile.type"},
		{"empty profile", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointProfile.Type = "" }), "spec.bundleEndpointProfile.type"},
		{"upper-case profile", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointProfile.Type = "HTTPS_WEB" }), "spec.bundleEndpointProfile.type"},
		{"profile with a hyphen", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointProfile.Type = "https-spiffe" }), "spec.bundleEndpointProfile.type"},
		{"https_spiffe without endpoint ID", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile.Type = v1alpha1.HTTPSSPIFFEProfileType
		}), "spec.bundleEndpointProfile"},
		{"https_spiffe with an https endpoint ID", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile = v1alpha1.BundleEndpointProfile{Type: v1alpha1.HTTPSSPIFFEProfileType, EndpointSPIFFEID: "https://partner.org/spire/server"}
		}), "spec.bundleEndpointProfile"},
		{"https_spiffe with a bare endpoint ID", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile = v1alpha1.BundleEndpointProfile{Type: v1alpha1.HTTPSSPIFFEProfileType, EndpointSPIFFEID: "partner.org/spire/server"}
		}), "spec.bundleEndpointProfile"},
		{"https_web with endpoint ID", cftd(func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile.EndpointSPIFFEID = partnerServer
		}), "spec.bundleEndpointProfile"},

		// ClusterFederatedTrustDomain, raw.
		{"ClusterFederatedTrustDomain without spec", raw("clusterfederatedtrustdomains", "ClusterFederatedTrustDomain", cftdSpec,
			func(o, _ object) { delete(o, "spec") }), "spec: Required value"},
		{"federation without trust domain", rawCFTD(func(s object) { delete(s, "trustDomain") }), "spec.trustDomain"},
		{"federation without bundle URL", rawCFTD(func(s object) { delete(s, "bundleEndpointURL") }), "spec.bundleEndpointURL"},
		{"federation without profile", rawCFTD(func(s object) { delete(s, "bundleEndpointProfile") }), "spec.bundleEndpointProfile"},
		{"profile without type", rawCFTD(func(s object) { s["bundleEndpointProfile"] = object{} }), "spec.bundleEndpointProfile.type"},
		{"profile as a string", rawCFTD(func(s object) { s["bundleEndpointProfile"] = "https_web" }), "spec.bundleEndpointProfile"},
		{"https_web with an empty endpoint ID", rawCFTD(func(s object) {
			s["bundleEndpointProfile"] = object{"type": "https_web", "endpointSPIFFEID": ""}
		}), "spec.bundleEndpointProfile"},
		{"bundle as an object", rawCFTD(func(s object) { s["trustDomainBundle"] = object{"keys": []any{}} }), "spec.trustDomainBundle"},
		{"trust domain as a list", rawCFTD(func(s object) { s["trustDomain"] = []any{"partner.org"} }), "spec.trustDomain"},
		{"misspelt endpointSpiffeID", rawCFTD(func(s object) {
			s["bundleEndpointProfile"] = object{"type": "https_spiffe", "endpointSpiffeID": partnerServer}
		}), "endpointSpiffeID"},
		{"misspelt bundleEndpointUrl", rawCFTD(func(s object) {
			delete(s, "bundleEndpointURL")
			s["bundleEndpointUrl"] = "https://partner.org/bundle"
		}), "bundleEndpointUrl"},
		{"update federation to an http URL", updateCFTD(validWeb, func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointURL = "http://partner.org:8443/bundle"
		}), "spec.bundleEndpointURL"},
		{"update federation to https_spiffe without endpoint ID", updateCFTD(validWeb, func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile.Type = v1alpha1.HTTPSSPIFFEProfileType
		}), "spec.bundleEndpointProfile"},
		{"update https_spiffe federation to https_web", updateCFTD(validSPIFFE, func(s *v1alpha1.ClusterFederatedTrustDomainSpec) {
			s.BundleEndpointProfile.Type = v1alpha1.HTTPSWebProfileType
		}), "spec.bundleEndpointProfile"},
	}

	objectName := regexp.MustCompile(`[^a-z0-9]+`)
	names := map[string]bool{}
	malformed := 0
	for _, tc := range cases {
		name := strings.Trim(objectName.ReplaceAllString(strings.ToLower(tc.name), "-"), "-")
		if names[name] {
			t.Fatalf("test bug: two cases named %s", name)
		}
		names[name] = true
		if tc.field != "" {
			malformed++
		}
		t.Run(tc.name, func(t *testing.T) {
			err := tc.create(name)
			if errors.Is(err, errTestBug) {
				t.Fatal(err)
			}
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
			t.Logf("rejected: %v", err)
		})
	}
	t.Logf("%d malformed resources rejected at admission", malformed)

	// Nothing was stored but the valid resources, and the rejected updates left them as they were.
	stored := map[string]int64{}
	clusterSPIFFEIDs, err := api.ClusterSPIFFEIDs().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range clusterSPIFFEIDs.Items {
		stored["ClusterSPIFFEID/"+o.Name] = o.Generation
	}
	cses, err := api.ClusterStaticEntries().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cses.Items {
		stored["ClusterStaticEntry/"+o.Name] = o.Generation
	}
	cftds, err := api.ClusterFederatedTrustDomains().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cftds.Items {
		stored["ClusterFederatedTrustDomain/"+o.Name] = o.Generation
	}
	want := map[string]int64{"ClusterSPIFFEID/" + validClusterSPIFFEID: 1, "ClusterStaticEntry/" + validCSE: 1,
		"ClusterFederatedTrustDomain/" + validWeb: 1, "ClusterFederatedTrustDomain/" + validSPIFFE: 1}
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored resources (name: generation), want only the valid ones, unchanged (-want +got):\n%s", diff)
	}
}
