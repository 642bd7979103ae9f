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
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
)

// Templates and the pod data they read are written by people the controller must not trust
// with SPIRE: whoever may create a ClusterSPIFFEID, and whoever may label or annotate a pod.
// These fuzz targets check the properties that make that safe, over arbitrary input:
//
//   - a rendered SPIFFE ID or parent ID is always a valid member of the trust domain;
//   - what is rendered is bounded in size;
//   - rendering returns promptly;
//   - selectors and keys behave as the reconciler assumes.
//
// Run one with: go test -run='^$' -fuzz='^FuzzRenderPodEntry$' -fuzztime=30s ./pkg/render/

// fuzzTrustDomain is the trust domain every fuzzed render must stay in.
var fuzzTrustDomain = spiffeid.RequireTrustDomainFromString("example.org")

// fuzzRenderBound is how long one render may take in a fuzz run. A normal render takes
// microseconds; the bound is loose because fuzz workers share a busy machine.
const fuzzRenderBound = time.Second

// maxEntryBytes bounds the wire size of an entry rendered from one SPIFFE ID template, one
// selector template and one DNS name template: each rendered string is capped at
// maxRenderedBytes, plus the pod-UID selector and protobuf framing.
const maxEntryBytes = 6*maxRenderedBytes + 1024

// renderWithin renders on another goroutine and fails the test if that takes longer than
// bound. A render that never returns is left behind: text/template cannot be interrupted.
func renderWithin(t *testing.T, bound time.Duration, r *Renderer, clusterSPIFFEID *ClusterSPIFFEID, pod *corev1.Pod, node *corev1.Node) (*spiretypes.Entry, time.Duration, error) {
	t.Helper()
	type result struct {
		e   *spiretypes.Entry
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		e, err := r.PodEntry(clusterSPIFFEID, pod, node, nil)
		done <- result{e, err}
	}()
	select {
	case res := <-done:
		return res.e, time.Since(start), res.err
	case <-time.After(bound):
		t.Fatalf("render did not return within %v (SPIFFE ID template %q)", bound, clusterSPIFFEID.Spec.SPIFFEIDTemplate)
		return nil, 0, nil
	}
}

// checkMember fails unless a rendered ID is a valid SPIFFE ID of the trust domain, no longer
// than a SPIFFE ID may be.
func checkMember(t *testing.T, field string, id *spiretypes.SPIFFEID) {
	t.Helper()
	s := SPIFFEIDString(id)
	if len(s) > maxRenderedBytes {
		t.Errorf("%s is %d bytes, more than %d", field, len(s), maxRenderedBytes)
	}
	if id.GetTrustDomain() != fuzzTrustDomain.Name() {
		t.Errorf("%s %q has trust domain %q, want %q", field, s, id.GetTrustDomain(), fuzzTrustDomain.Name())
	}
	parsed, err := spiffeid.FromString(s)
	if err != nil {
		t.Errorf("%s %q is not a valid SPIFFE ID: %v", field, s, err)
		return
	}
	if !parsed.MemberOf(fuzzTrustDomain) || parsed.Path() != id.GetPath() {
		t.Errorf("%s %q reparses as %q", field, s, parsed)
	}
}

func fuzzPod(label, annotation string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "production", UID: "pod-uid-1",
			Labels:      map[string]string{"app": label, "team": "a"},
			Annotations: map[string]string{"id": annotation}},
		Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "web"},
	}
}

func FuzzRenderPodEntry(f *testing.F) {
	const parent = "spiffe://{{ .TrustDomain }}/k8s-node/{{ .NodeMeta.Name }}"
	for _, s := range []struct{ spiffeID, parentID, selector, dns, label, annotation string }{
		{nsSATemplate, config.DefaultParentIDTemplate, "k8s:ns:{{ .PodMeta.Namespace }}", "{{ .PodMeta.Name }}.example.com", "web", ""},
		{"spiffe://{{ .TrustDomain }}/app/{{ index .PodMeta.Labels \"app\" }}", parent, "k8s:pod-label:app:{{ index .PodMeta.Labels \"app\" }}", "", "web-server", ""},
		{"{{ index .PodMeta.Annotations \"id\" }}", parent, "", "", "x", "spiffe://example.org/from/annotation"},
		{"{{ index .PodMeta.Annotations \"id\" }}", parent, "", "", "x", "spiffe://example.org.evil.com/x"},
		{"spiffe://{{ .TrustDomain }}{{ index .PodMeta.Annotations \"id\" }}", parent, "", "", "x", "@evil.com/x"},
		{"spiffe://{{ index .PodMeta.Labels \"app\" }}/x", parent, "", "", "evil.com", ""},
		{"spiffe://EXAMPLE.ORG/x", parent, "", "", "", ""},
		{"spiffe://example%2Eorg/x", parent, "", "", "", ""},
		{"spiffe://user@example.org/x", parent, "", "", "", ""},
		{"spiffe://example.org:443/x", parent, "", "", "", ""},
		{"spiffe://example.org/../x", parent, "", "", "", ""},
		{"spiffe://example.org/%2e%2e/x", parent, "", "", "", ""},
		{"spiffe://example.org/x", "{{ index .PodMeta.Annotations \"id\" }}", "", "", "", "spiffe://evil.org/agent"},
		{"spiffe://example.org/{{ printf \"%02000d\" 0 }}", parent, "", "", "", ""},
		{"spiffe://example.org/{{ range .PodMeta.Labels }}{{ . }}{{ end }}", parent, "a:{{ .PodSpec.NodeName }}", "*.example.com", "v", ""},
		{"spiffe://example.org/{{ .PodMeta.NoSuchField }}", parent, "", "", "", ""},
		{"spiffe://example.org/{{ range 3 }}{{ range 2 }}a{{ end }}{{ end }}", parent, "", "", "", ""},
		// No recursive template here: one that recurses to text/template's depth limit takes
		// about the bound below under -race; TestHostileTemplatesReturnPromptly pins that case.
	} {
		f.Add(s.spiffeID, s.parentID, s.selector, s.dns, s.label, s.annotation)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid-1"}}
	f.Fuzz(func(t *testing.T, spiffeIDTemplate, parentIDTemplate, selectorTemplate, dnsTemplate, label, annotation string) {
		r, err := NewRenderer(Settings{TrustDomain: fuzzTrustDomain, ClusterName: "demo", ClusterDomain: "cluster.local", ParentIDTemplate: parentIDTemplate})
		if err != nil {
			return
		}
		spec := spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: spiffeIDTemplate}
		// An empty template is "none", so the fuzzer does not spend its time on inputs that
		// fail only because an empty selector is invalid.
		if selectorTemplate != "" {
			spec.WorkloadSelectorTemplates = []string{selectorTemplate}
		}
		if dnsTemplate != "" {
			spec.DNSNameTemplates = []string{dnsTemplate}
		}
		clusterSPIFFEID := CompileClusterSPIFFEID(&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "fuzz", UID: "u"}, Spec: spec})
		pod := fuzzPod(label, annotation)
		e, _, err := renderWithin(t, fuzzRenderBound, r, clusterSPIFFEID, pod, node)
		if err != nil {
			if e != nil {
				t.Errorf("render returned both an entry and an error: %v", err)
			}
			return
		}
		checkMember(t, "SPIFFE ID", e.GetSpiffeId())
		checkMember(t, "parent ID", e.GetParentId())
		if n := proto.Size(e); n > maxEntryBytes {
			t.Errorf("rendered entry is %d bytes, more than %d", n, maxEntryBytes)
		}
		sels := e.GetSelectors()
		if len(sels) != 1+len(spec.WorkloadSelectorTemplates) {
			t.Fatalf("entry has %d selectors, want %d", len(sels), 1+len(spec.WorkloadSelectorTemplates))
		}
		if sels[0].GetType() != "k8s" || sels[0].GetValue() != PodUIDSelectorPrefix+string(pod.UID) {
			t.Errorf("first selector = %v, want the pod's UID selector", sels[0])
		}
		for _, s := range sels {
			if s.GetType() == "" || s.GetValue() == "" || strings.Contains(s.GetType(), ":") {
				t.Errorf("invalid selector %q:%q", s.GetType(), s.GetValue())
			}
		}
		if got := PodUIDOf(e); got != pod.UID {
			t.Errorf("entry is scoped to pod %q, want %q", got, pod.UID)
		}
		for _, name := range e.GetDnsNames() {
			if err := validateDNSName(name); err != nil {
				t.Errorf("rendered an invalid DNS name: %v", err)
			}
		}
	})
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"k8s:ns:default", "k8s:pod-label:app:web", "unix:uid:0", "a:b", "k8s", ":x", "x:", ":", "", "::", "a::", "k8s:pod-uid:", "ünï:cödé"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := parseSelector(s)
		colon := strings.Index(s, ":")
		wellFormed := colon > 0 && colon < len(s)-1 && !strings.ContainsFunc(s, unicode.IsControl)
		if err != nil {
			if wellFormed {
				t.Errorf("parseSelector(%q) rejected a well-formed selector: %v", s, err)
			}
			return
		}
		if !wellFormed {
			t.Fatalf("parseSelector(%q) accepted a selector with an empty part: %q:%q", s, sel.GetType(), sel.GetValue())
		}
		if sel.GetType() == "" || sel.GetValue() == "" {
			t.Errorf("parseSelector(%q) = %q:%q, an empty part", s, sel.GetType(), sel.GetValue())
		}
		if strings.Contains(sel.GetType(), ":") {
			t.Errorf("parseSelector(%q) put a colon in the type %q", s, sel.GetType())
		}
		if got := sel.GetType() + ":" + sel.GetValue(); got != s {
			t.Errorf("parseSelector(%q) does not round-trip: %q", s, got)
		}
		again, err := parseSelector(sel.GetType() + ":" + sel.GetValue())
		if err != nil || !proto.Equal(again, sel) {
			t.Errorf("reparsing %q: %v, %v", s, again, err)
		}
	})
}

func FuzzRenderStaticEntry(f *testing.F) {
	for _, s := range []struct {
		spiffeID, parentID, sel1, sel2, dns, federatesWith string
		ttl, jwtTTL                                        int64
	}{
		{"spiffe://example.org/db", "spiffe://example.org/spire/server", "unix:uid:999", "k8s:ns:db", "db.example.com", "partner.org", 3600, 300},
		{"spiffe://example.org/db", "spiffe://example.org/spire/server", "k8s:pod-uid:123", "", "", "", 0, 0},
		{"spiffe://other.org/db", "spiffe://example.org/spire/server", "unix:uid:1", "", "", "", 0, 0},
		{"spiffe://example.org/db", "spiffe://EXAMPLE.org/x", "unix:uid:1", "", "*.example.com", "spiffe://partner.org", -1, 0},
		{"spiffe://example.org.evil.com/db", "spiffe://example.org/x", "unix:uid:1", "", "", "", 1 << 62, 0},
	} {
		f.Add(s.spiffeID, s.parentID, s.sel1, s.sel2, s.dns, s.federatesWith, s.ttl, s.jwtTTL)
	}
	r := &Renderer{trustDomain: fuzzTrustDomain}
	f.Fuzz(func(t *testing.T, spiffeID, parentID, sel1, sel2, dns, federatesWith string, ttl, jwtTTL int64) {
		spec := &spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: spiffeID, ParentID: parentID,
			X509SVIDTTL: metav1.Duration{Duration: time.Duration(ttl)}, JWTSVIDTTL: metav1.Duration{Duration: time.Duration(jwtTTL)}}
		for _, s := range []string{sel1, sel2} {
			if s != "" {
				spec.Selectors = append(spec.Selectors, s)
			}
		}
		if dns != "" {
			spec.DNSNames = []string{dns}
		}
		if federatesWith != "" {
			spec.FederatesWith = []string{federatesWith}
		}
		e, err := r.staticEntry(spec)
		if err != nil {
			return
		}
		checkMember(t, "SPIFFE ID", e.GetSpiffeId())
		checkMember(t, "parent ID", e.GetParentId())
		if len(e.GetSelectors()) == 0 {
			t.Errorf("accepted a static entry without selectors")
		}
		for _, s := range e.GetSelectors() {
			if s.GetType() == "" || s.GetValue() == "" || strings.Contains(s.GetType(), ":") {
				t.Errorf("invalid selector %q:%q", s.GetType(), s.GetValue())
			}
		}
		// A static entry taken for a pod's would be deleted with that pod.
		if uid := PodUIDOf(e); uid != "" {
			t.Errorf("static entry carries pod UID selector %q", uid)
		}
		if e.GetX509SvidTtl() < 0 || e.GetJwtSvidTtl() < 0 {
			t.Errorf("negative TTLs %d/%d", e.GetX509SvidTtl(), e.GetJwtSvidTtl())
		}
		for _, name := range e.GetDnsNames() {
			if err := validateDNSName(name); err != nil {
				t.Errorf("accepted an invalid DNS name: %v", err)
			}
		}
		for _, td := range e.GetFederatesWith() {
			if parsed, err := spiffeid.TrustDomainFromString(td); err != nil || parsed.Name() != td {
				t.Errorf("federatesWith %q is not a bare trust domain name (%v)", td, err)
			}
		}
	})
}

// fuzzSelector splits a fuzzed string as a selector, keeping whatever it holds: keyOf must
// behave on anything SPIRE or a template hands it.
func fuzzSelector(s string) *spiretypes.Selector {
	typ, value, _ := strings.Cut(s, ":")
	return &spiretypes.Selector{Type: typ, Value: value}
}

func FuzzKeyOf(f *testing.F) {
	f.Add("/ns/a/sa/b", "/k8s-node/n", "k8s:pod-uid:1", "k8s:ns:a", "k8s:sa:b", uint8(0))
	f.Add("/x", "/y", "unix:uid:0", "unix:uid:0", "k8s:pod-label:a:b", uint8(3))
	f.Add("/x", "/y", "a:b", "c:d", "", uint8(5))
	f.Fuzz(func(t *testing.T, spiffePath, parentPath, s1, s2, s3 string, perm uint8) {
		mk := func(sels ...string) *spiretypes.Entry {
			e := &spiretypes.Entry{
				SpiffeId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: spiffePath},
				ParentId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: parentPath},
			}
			for _, s := range sels {
				e.Selectors = append(e.Selectors, fuzzSelector(s))
			}
			return e
		}
		orders := [][]string{{s1, s2, s3}, {s1, s3, s2}, {s2, s1, s3}, {s2, s3, s1}, {s3, s1, s2}, {s3, s2, s1}}
		base := mk(orders[0]...)
		key := KeyOf(base)
		other := mk(orders[int(perm)%len(orders)]...)
		// Fields outside the key must not change it either.
		other.Id, other.CreatedAt, other.RevisionNumber = "some-id", 12345, 7
		other.DnsNames, other.Hint, other.Admin = []string{"x.example.com"}, "h", true
		if got := KeyOf(other); got != key {
			t.Errorf("key changed with selector order %v: %s != %s", orders[int(perm)%len(orders)], got, key)
		}
		// The key identifies the entry: changing the SPIFFE ID or parent ID changes it.
		moved := mk(orders[0]...)
		moved.SpiffeId.Path += "/x"
		if KeyOf(moved) == key {
			t.Errorf("key ignores the SPIFFE ID")
		}
		reparented := mk(orders[0]...)
		reparented.ParentId.Path += "/x"
		if KeyOf(reparented) == key {
			t.Errorf("key ignores the parent ID")
		}
		// Different selector sets are different entries, whatever bytes they hold.
		if KeyOf(mk(s1, s2)) == key {
			t.Errorf("selector lists %q and %q share a key", []string{s1, s2, s3}, []string{s1, s2})
		}
	})
}

// The tests below pin the template trust boundary with inputs a fuzzer is unlikely to reach.

// hostileRenderBound is how long rendering one pod's entry may take: a hundred times an
// ordinary render on the same machine (so the bound follows the machine's speed and -race),
// and at least 250ms. The controller renders every selected pod at each full resync, holding the
// lock that stops every pod sync, so a template that costs a tenth of a second for each of
// 30,000 pods stalls the controller for most of an hour.
func hostileRenderBound(t *testing.T) time.Duration {
	t.Helper()
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	clusterSPIFFEID := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate,
		WorkloadSelectorTemplates: []string{"k8s:ns:{{ .PodMeta.Namespace }}"}, DNSNameTemplates: []string{"{{ .PodMeta.Name }}.example.com"}})
	const n = 20
	start := time.Now()
	for range n {
		if _, err := r.PodEntry(clusterSPIFFEID, testPod(), testNode(), nil); err != nil {
			t.Fatal(err)
		}
	}
	ordinary := time.Since(start) / n
	// The floor leaves room for the race detector on a loaded machine (a 5000-iteration range
	// limit trips in tens of milliseconds there) and still sits far below the seconds each
	// hostile template takes unprotected.
	return max(250*time.Millisecond, 100*ordinary)
}

// exponentialTemplate defines n templates that each call the next one twice: 2^n calls from a
// few hundred bytes, writing nothing, so that the output bound never trips.
func exponentialTemplate(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{{ define "t%d" }}{{ template "t%d" }}{{ template "t%d" }}{{ end }}`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `{{ define "t%d" }}{{ end }}spiffe://example.org/x{{ template "t0" }}`, n)
	return b.String()
}

// TestHostileTemplatesReturnPromptly renders templates a ClusterSPIFFEID author could write to
// keep the controller busy without producing output. Each is sized to finish within seconds
// on an unprotected renderer, so that a failure costs the test run little; a real attacker
// adds one more nesting level and multiplies the time by thousands.
func TestHostileTemplatesReturnPromptly(t *testing.T) {
	manyLabels := fuzzPod("web", "")
	for i := range 100 {
		manyLabels.Labels[fmt.Sprintf("l%03d", i)] = "v"
	}
	node := testNode()
	bound := hostileRenderBound(t)
	t.Logf("bound: %v", bound)
	for _, tc := range []struct {
		name     string
		template string
		pod      *corev1.Pod
	}{
		{"deep recursion", `{{ define "loop" }}{{ template "loop" }}{{ end }}spiffe://example.org/{{ template "loop" }}`, testPod()},
		{"exponential recursion", exponentialTemplate(19), testPod()},
		{"nested range over integers", "spiffe://example.org/x{{ range 3000 }}{{ range 3000 }}{{ end }}{{ end }}", testPod()},
		{"nested range over the pod's labels", "spiffe://example.org/x{{ range .PodMeta.Labels }}{{ range $.PodMeta.Labels }}" +
			"{{ range $.PodMeta.Labels }}{{ end }}{{ end }}{{ end }}", manyLabels},
		{"allocation churn", `spiffe://example.org/x{{ range 100 }}{{ $x := printf "%0999999d" 0 }}{{ end }}`, testPod()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRenderer(t, config.DefaultParentIDTemplate)
			clusterSPIFFEID := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tc.template})
			// Wait for the render to end however long it takes, so that a failure does not
			// leave it burning a CPU under the tests that follow.
			e, took, err := renderWithin(t, 5*time.Minute, r, clusterSPIFFEID, tc.pod, node)
			t.Logf("render took %v (err: %v)", took, err)
			if err == nil {
				t.Errorf("rendered %s from a hostile template, want it refused", SPIFFEIDString(e.GetSpiffeId()))
			}
			if took > bound {
				t.Errorf("render took %v, more than %v: a ClusterSPIFFEID author can stall the controller", took, bound)
			}
		})
	}
}

// TestHostileTemplateMemoryIsBounded builds a 32 MiB string in a template variable by doubling
// and writes only its length. The output bound sees 8 bytes; memory does not. Twenty more
// doublings, a few hundred bytes of template, exhaust any node's memory.
func TestHostileTemplateMemoryIsBounded(t *testing.T) {
	const maxAlloc = 16 << 20
	tmpl := `{{ $a := printf "%0999999d" 0 }}` + strings.Repeat(`{{ $a = printf "%s%s" $a $a }}`, 5) +
		`spiffe://example.org/len/{{ len $a }}`
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	clusterSPIFFEID := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tmpl})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e, err := r.PodEntry(clusterSPIFFEID, testPod(), testNode(), nil)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("render allocated %d MiB, result %v, err %v", allocated>>20, SPIFFEIDString(e.GetSpiffeId()), err)
	if err == nil {
		t.Errorf("rendered %s from a template that grows a variable, want it refused", SPIFFEIDString(e.GetSpiffeId()))
	}
	if allocated > maxAlloc {
		t.Errorf("one render allocated %d MiB, more than %d MiB: template values are unbounded", allocated>>20, maxAlloc>>20)
	}
}

// TestWorkloadSelectorsCannotClaimAPodUID: a pod entry is owned by the pod whose UID its
// k8s:pod-uid selector names, and ClusterStaticEntries may not carry that selector. A workload
// selector template must not be able to add a second one: SPIRE echoes created entries with
// their selectors sorted, so the entry cache would file the entry under whichever UID sorts
// first — another pod's, whose next sync deletes it, while its own pod recreates it.
func TestWorkloadSelectorsCannotClaimAPodUID(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	for _, tmpl := range []string{"k8s:pod-uid:0", `k8s:pod-uid:{{ index .PodMeta.Annotations "id" }}`} {
		clusterSPIFFEID := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate, WorkloadSelectorTemplates: []string{tmpl}})
		e, err := r.PodEntry(clusterSPIFFEID, fuzzPod("web", "another-pods-uid"), testNode(), nil)
		if err == nil {
			t.Errorf("workload selector template %q rendered an entry with selectors %v, want it refused as reserved", tmpl, e.GetSelectors())
		}
	}
}

// TestKeyOfSeparatesSelectorsContainingNUL: a selector may hold a NUL where SPIRE or an older
// writer put one, even though templates cannot render it (printf "%c" 0 is refused by
// parseSelector). One selector "a:b<NUL>a:c" and the two selectors "a:b", "a:c" are different
// entries, and KeyOf must not let the reconciler mask or keep the wrong one.
func TestKeyOfSeparatesSelectorsContainingNUL(t *testing.T) {
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	withNUL := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: nsSATemplate,
		WorkloadSelectorTemplates: []string{`a:b{{ printf "%c" 0 }}a:c`}})
	if e, err := r.PodEntry(withNUL, testPod(), testNode(), nil); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("rendered selectors %q with a NUL (err %v), want a refusal naming the control character", selectorList(e), err)
	}

	entry := func(selectors ...*spiretypes.Selector) *spiretypes.Entry {
		return &spiretypes.Entry{SpiffeId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/w"},
			ParentId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/n"}, Selectors: selectors}
	}
	joined := entry(&spiretypes.Selector{Type: "a", Value: "b\x00a:c"})
	split := entry(&spiretypes.Selector{Type: "a", Value: "b"}, &spiretypes.Selector{Type: "a", Value: "c"})
	if KeyOf(joined) == KeyOf(split) {
		t.Errorf("entries with selectors %q and %q have the same key", selectorList(joined), selectorList(split))
	}
	// Nor may a NUL move the boundary between the SPIFFE ID and the parent ID.
	shifted := entry()
	shifted.SpiffeId.Path, shifted.ParentId.Path = "/w\x00spiffe://example.org", ""
	if KeyOf(shifted) == KeyOf(entry()) {
		t.Errorf("a NUL in the SPIFFE ID shifts it into the parent ID")
	}
}

func selectorList(e *spiretypes.Entry) []string {
	var out []string
	for _, s := range e.GetSelectors() {
		out = append(out, s.GetType()+":"+s.GetValue())
	}
	return out
}

// TestTemplatesStayInTheTrustDomain renders IDs built to escape the trust domain, by the
// ClusterSPIFFEID author and through pod data the pod's author controls; each must be refused.
func TestTemplatesStayInTheTrustDomain(t *testing.T) {
	byAnnotation := `{{ index .PodMeta.Annotations "id" }}`
	for _, tc := range []struct{ name, spiffeID, parentID, annotation string }{
		{name: "other trust domain", spiffeID: "spiffe://evil.org/x"},
		{name: "suffix domain", spiffeID: "spiffe://{{ .TrustDomain }}.evil.com/x"},
		{name: "userinfo", spiffeID: "spiffe://{{ .TrustDomain }}@evil.com/x"},
		{name: "userinfo before", spiffeID: "spiffe://evil.com@{{ .TrustDomain }}/x"},
		{name: "port", spiffeID: "spiffe://{{ .TrustDomain }}:443/x"},
		{name: "uppercase trust domain", spiffeID: "spiffe://EXAMPLE.ORG/x"},
		{name: "uppercase scheme", spiffeID: "SPIFFE://example.org/x"},
		{name: "percent-encoded dot in trust domain", spiffeID: "spiffe://example%2Eorg/x"},
		{name: "percent-encoded suffix", spiffeID: "spiffe://{{ .TrustDomain }}%2Eevil.com/x"},
		{name: "percent-encoded dot segments", spiffeID: "spiffe://{{ .TrustDomain }}/%2e%2e/x"},
		{name: "dot segments", spiffeID: "spiffe://{{ .TrustDomain }}/../x"},
		{name: "empty trust domain", spiffeID: "spiffe:///x"},
		{name: "query", spiffeID: "spiffe://{{ .TrustDomain }}/x?y=z"},
		{name: "fragment", spiffeID: "spiffe://{{ .TrustDomain }}/x#y"},
		{name: "leading space", spiffeID: " spiffe://{{ .TrustDomain }}/x"},
		{name: "homoglyph", spiffeID: "spiffe://exаmple.org/x"},
		{name: "annotation: other trust domain", spiffeID: byAnnotation, annotation: "spiffe://evil.org/x"},
		{name: "annotation: suffix", spiffeID: "spiffe://{{ .TrustDomain }}" + byAnnotation, annotation: ".evil.com/x"},
		{name: "annotation: userinfo", spiffeID: "spiffe://{{ .TrustDomain }}" + byAnnotation, annotation: "@evil.com/x"},
		{name: "annotation: newline", spiffeID: byAnnotation, annotation: "spiffe://example.org/x\nspiffe://evil.org/y"},
		{name: "annotation: backslash", spiffeID: byAnnotation, annotation: `spiffe://evil.org\@example.org/x`},
		{name: "label: trust domain", spiffeID: `spiffe://{{ index .PodMeta.Labels "app" }}/x`},
		{name: "parent from annotation", spiffeID: nsSATemplate, parentID: byAnnotation, annotation: "spiffe://evil.org/agent"},
		{name: "parent suffix from annotation", spiffeID: nsSATemplate, parentID: "spiffe://{{ .TrustDomain }}" + byAnnotation, annotation: ".evil.com/agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parentID := tc.parentID
			if parentID == "" {
				parentID = config.DefaultParentIDTemplate
			}
			r := newTestRenderer(t, parentID)
			// The pod's app label names another trust domain; label values cannot hold more.
			pod := fuzzPod("evil.org", tc.annotation)
			e, err := r.PodEntry(testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: tc.spiffeID}), pod, testNode(), nil)
			if err == nil {
				t.Errorf("rendered SPIFFE ID %s, parent ID %s; want a refusal", SPIFFEIDString(e.GetSpiffeId()), SPIFFEIDString(e.GetParentId()))
			}
		})
	}
}
