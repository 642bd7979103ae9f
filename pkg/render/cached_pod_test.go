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
	"reflect"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// filler sets every exported field it can reach to a distinct non-zero value, with two
// elements in every slice and map, so that a view or a cached pod that drops a field shows.
type filler struct{ n int }

var (
	timeType     = reflect.TypeFor[metav1.Time]()
	quantityType = reflect.TypeFor[resource.Quantity]()
)

func (f *filler) fill(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	f.n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", f.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.n % 100))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.n % 100))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.n) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			f.fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k, depth+1)
			f.fill(e, depth+1)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		switch v.Type() {
		case timeType:
			v.Set(reflect.ValueOf(metav1.NewTime(time.Unix(int64(1_700_000_000+f.n), 0).UTC())))
			return
		case quantityType:
			v.Set(reflect.ValueOf(resource.MustParse(fmt.Sprintf("%dMi", f.n))))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	}
}

func richPodAndNode() (*corev1.Pod, *corev1.Node) {
	f := &filler{}
	pod, node := &corev1.Pod{}, &corev1.Node{}
	f.fill(reflect.ValueOf(pod).Elem(), 0)
	f.fill(reflect.ValueOf(node).Elem(), 0)
	pod.Status.Conditions[0].Type = corev1.PodScheduled
	return pod, node
}

// templateObjects are the objects templates see, by the expression that reaches each.
var templateObjects = []struct {
	expr string
	typ  reflect.Type
}{
	{".PodMeta", reflect.TypeFor[metav1.ObjectMeta]()},
	{".PodSpec", reflect.TypeFor[corev1.PodSpec]()},
	{".NodeMeta", reflect.TypeFor[metav1.ObjectMeta]()},
	{".NodeSpec", reflect.TypeFor[corev1.NodeSpec]()},
}

// fieldPaths lists template expressions for every exported field below expr, of type t, down
// to depth: slices by their first element, pointers through, maps and leaves whole.
func fieldPaths(expr string, t reflect.Type, depth int) []string {
	paths := []string{expr}
	if depth == 0 {
		return paths
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		return append(paths, fieldPaths(fmt.Sprintf("(index %s 0)", expr), t.Elem(), depth-1)...)
	case t.Kind() != reflect.Struct || t == timeType || t == quantityType:
		return paths
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			paths = append(paths, fieldPaths(expr+"."+f.Name, f.Type, depth-1)...)
		}
	}
	return paths
}

var addresses = regexp.MustCompile(`0x[0-9a-f]+`)

// renderTemplate renders text over pod and node, with a view of the fields of reach.
func renderTemplate(t *testing.T, text string, pod *corev1.Pod, node *corev1.Node, reach Reach) string {
	t.Helper()
	tmpl, err := parseTemplate("t", text)
	if err != nil {
		t.Fatalf("parsing %q: %v", text, err)
	}
	in := inputOf("example.org", pod, node)
	in.reach = reach
	out, err := execute(tmpl, in)
	if err != nil {
		return "error: " + err.Error()
	}
	// A view is a copy: the pointers it prints are its own.
	return addresses.ReplaceAllString(out, "0xADDRESS")
}

func mustParse(t *testing.T, text string) *template.Template {
	t.Helper()
	tmpl, err := parseTemplate("t", text)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl.Template
}

// everyFieldTemplates are a template per field path templates can reach, and some ways of
// reaching them that the reach walk must follow or give up on.
func everyFieldTemplates(t *testing.T) []string {
	var templates []string
	for _, root := range templateObjects {
		for _, path := range fieldPaths(root.expr, root.typ, 6) {
			templates = append(templates, "{{ "+path+" }}")
		}
	}
	templates = append(templates,
		`{{ . }}`,
		`{{ printf "%v" .PodSpec }}`,
		`{{ .PodMeta.GetAnnotations }}`,
		`{{ $s := .PodSpec }}{{ $s.Hostname }}`,
		`{{ with .PodSpec }}{{ .Hostname }}{{ else }}{{ .PodMeta.Name }}{{ end }}`,
		`{{ range .PodSpec.Containers }}{{ .Image }}{{ end }}`,
		`{{ define "x" }}{{ .Subdomain }}{{ end }}{{ template "x" .PodSpec }}`,
		`{{ $x := .PodMeta }}{{ range .PodSpec.Containers }}{{ $x = $.NodeMeta }}{{ end }}{{ $x.Labels }}`,
		`{{ if .PodSpec.HostNetwork }}{{ .PodSpec.NodeSelector }}{{ end }}`,
		`{{ len .PodSpec.Volumes }}`,
	)
	if len(templates) < 1000 {
		t.Fatalf("only %d templates: the field walk is broken", len(templates))
	}
	return templates
}

// TestReachLimitedViewRendersAsTheWholeView renders every field templates can see through a
// view of all fields and through a view of only the fields the template's reach holds, which
// is what rendering builds: the output must not change.
func TestReachLimitedViewRendersAsTheWholeView(t *testing.T) {
	pod, node := richPodAndNode()
	templates := everyFieldTemplates(t)
	rendered := 0
	for _, text := range templates {
		reach := TemplateReach(mustParse(t, text))
		whole := renderTemplate(t, text, pod, node, allReach)
		if got := renderTemplate(t, text, pod, node, reach); got != whole {
			t.Errorf("%s renders %q from the whole view but %q from the view of %+v", text, whole, got, reach)
		}
		// A value whose printing nothing bounds is refused by type, so its path was followed.
		if !strings.HasPrefix(whole, "error: ") || strings.Contains(whole, "cannot print a value of type") {
			rendered++
		}
	}
	// Most paths must render, or the comparison proves little.
	if rendered < len(templates)*3/4 {
		t.Errorf("only %d of %d templates rendered without error", rendered, len(templates))
	}
}

// TestCachedPodRendersAsTheWholePod renders every field templates can see through the whole
// pod and through what the pod cache keeps of it, for every template that does not read
// uncached fields: the output must not change. Managed fields are empty in both: templates
// have never seen them.
func TestCachedPodRendersAsTheWholePod(t *testing.T) {
	pod, node := richPodAndNode()
	pod.ManagedFields = nil
	cached := CachedPod(pod)
	fromCache, fromWhole := 0, 0
	for _, text := range everyFieldTemplates(t) {
		reach := TemplateReach(mustParse(t, text))
		if !reach.readsOnlyCachedPodFields() {
			fromWhole++
			continue
		}
		fromCache++
		if whole, got := renderTemplate(t, text, pod, node, reach), renderTemplate(t, text, cached, node, reach); whole != got {
			t.Errorf("%s renders %q from the whole pod but %q from the cached pod", text, whole, got)
		}
	}
	t.Logf("%d templates render from the cache, %d from the whole pod", fromCache, fromWhole)
	// The paths of the pod's and the node's metadata, of the node's spec and of the cached
	// spec fields render from the cache (103 of them); the rest of the pod's spec does not.
	if fromCache < 100 || fromWhole < 500 {
		t.Errorf("%d templates render from the cache and %d from the whole pod: the reach walk is broken", fromCache, fromWhole)
	}
}

// TestCachedPodKeepsTheSpecFieldsOfTheTable: the cached pod keeps exactly the spec fields of
// cachedPodSpecFields, the ones ReadsUncachedPodFields treats as cached, the metadata but
// managedFields, the phase and the PodScheduled condition.
func TestCachedPodKeepsTheSpecFieldsOfTheTable(t *testing.T) {
	pod, _ := richPodAndNode()
	cached := CachedPod(pod)
	spec, whole := reflect.ValueOf(cached.Spec), reflect.ValueOf(pod.Spec)
	for i := range spec.NumField() {
		name := spec.Type().Field(i).Name
		kept := !spec.Field(i).IsZero()
		if kept != cachedPodSpecFields.Has(name) {
			t.Errorf("PodSpec.%s kept: %v, in cachedPodSpecFields: %v", name, kept, !kept)
		}
		if kept && !reflect.DeepEqual(spec.Field(i).Interface(), whole.Field(i).Interface()) {
			t.Errorf("PodSpec.%s changed", name)
		}
	}
	meta := pod.ObjectMeta
	meta.ManagedFields = nil
	scheduled := pod.Status.Conditions[0]
	if !reflect.DeepEqual(cached.ObjectMeta, meta) || cached.Status.Phase != pod.Status.Phase || len(cached.Status.Conditions) != 1 ||
		cached.Status.Conditions[0].Status != scheduled.Status || !cached.Status.Conditions[0].LastTransitionTime.Equal(&scheduled.LastTransitionTime) {
		t.Errorf("cached pod %+v keeps the wrong metadata or status", cached)
	}
}

func TestNeedsWholePod(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "prod"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", Labels: map[string]string{"app": "web"}}}
	clusterSPIFFEID := func(app, template string, dnsNames ...string) *ClusterSPIFFEID {
		return testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: template, DNSNameTemplates: dnsNames,
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
	image := clusterSPIFFEID("web", "spiffe://example.org/{{ (index .PodSpec.Containers 0).Image }}")
	for _, tc := range []struct {
		name             string
		clusterSPIFFEIDs []*ClusterSPIFFEID
		want             bool
	}{
		{"cached fields only", []*ClusterSPIFFEID{clusterSPIFFEID("web", nsSATemplate, "{{ .PodSpec.Hostname }}.{{ index .PodMeta.Labels \"app\" }}")}, false},
		{"the whole metadata", []*ClusterSPIFFEID{clusterSPIFFEID("web", nsSATemplate, "{{ .PodMeta }}")}, false},
		{"a container's image", []*ClusterSPIFFEID{clusterSPIFFEID("web", nsSATemplate), image}, true},
		{"volumes in a DNS name", []*ClusterSPIFFEID{clusterSPIFFEID("web", nsSATemplate, "{{ len .PodSpec.Volumes }}.example.org")}, true},
		{"the whole spec", []*ClusterSPIFFEID{clusterSPIFFEID("web", "spiffe://example.org/{{ .PodSpec }}")}, true},
		{"a container's image, not selecting the pod", []*ClusterSPIFFEID{clusterSPIFFEID("db", "spiffe://example.org/{{ (index .PodSpec.Containers 0).Image }}")}, false},
		{"a method, which fails to render", []*ClusterSPIFFEID{clusterSPIFFEID("web", "spiffe://example.org/{{ .PodSpec.String }}")}, false},
	} {
		if got := NeedsWholePod(tc.clusterSPIFFEIDs, ns, pod); got != tc.want {
			t.Errorf("%s: NeedsWholePod = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !image.ReadsUncachedPodFields() {
		t.Error("a ClusterSPIFFEID reading a container's image does not read uncached fields")
	}
}
