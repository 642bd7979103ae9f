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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// filler sets every exported field it can reach to a distinct non-zero value, with two
// elements in every slice and map, so that a projection that drops a field shows.
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

func renderTemplate(t *testing.T, text string, pod *corev1.Pod, node *corev1.Node) string {
	t.Helper()
	tmpl, err := parseTemplate("t", text)
	if err != nil {
		t.Fatalf("parsing %q: %v", text, err)
	}
	out, err := execute(tmpl, inputOf("example.org", pod, node))
	if err != nil {
		return "error: " + err.Error()
	}
	// A view is a copy: the pointers it prints are its own.
	return addresses.ReplaceAllString(out, "0xADDRESS")
}

// TestProjectionRendersAsTheFullObjects renders every field templates can see, and some ways
// of reaching them that the walk must follow or give up on, through the full pod and node and
// through their projections for the template's own reach: the output must not change.
func TestProjectionRendersAsTheFullObjects(t *testing.T) {
	pod, node := richPodAndNode()
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
	t.Logf("%d templates", len(templates))
	if len(templates) < 1000 {
		t.Fatalf("only %d templates: the field walk is broken", len(templates))
	}
	rendered := 0
	for _, text := range templates {
		tmpl, err := parseTemplate("t", text)
		if err != nil {
			t.Fatalf("parsing %q: %v", text, err)
		}
		reach := TemplateReach(tmpl.Template)
		full := renderTemplate(t, text, pod, node)
		projected := renderTemplate(t, text, ProjectPod(pod, reach), ProjectNode(node, reach))
		if full != projected {
			t.Errorf("%s renders %q from the full objects but %q from the projection for %+v", text, full, projected, reach)
		}
		// A value whose printing nothing bounds is refused by type, so its path was followed.
		if !strings.HasPrefix(full, "error: ") || strings.Contains(full, "cannot print a value of type") {
			rendered++
		}
	}
	// Most paths must render, or the comparison proves little.
	if rendered < len(templates)*3/4 {
		t.Errorf("only %d of %d templates rendered without error", rendered, len(templates))
	}
}

// TestFullReachRendersAsTheFullObjects is the same check for the projection that keeps all
// templates can see but managedFields.
func TestFullReachRendersAsTheFullObjects(t *testing.T) {
	pod, node := richPodAndNode()
	projectedPod, projectedNode := ProjectPod(pod, FullReach()), ProjectNode(node, FullReach())
	for _, path := range append(fieldPaths(".PodMeta", reflect.TypeFor[metav1.ObjectMeta](), 3),
		append(fieldPaths(".PodSpec", reflect.TypeFor[corev1.PodSpec](), 3),
			append(fieldPaths(".NodeMeta", reflect.TypeFor[metav1.ObjectMeta](), 3),
				fieldPaths(".NodeSpec", reflect.TypeFor[corev1.NodeSpec](), 3)...)...)...) {
		// managedFields, alone or within the whole metadata, are the one thing it drops.
		if strings.Contains(path, "ManagedFields") || path == ".PodMeta" || path == ".NodeMeta" {
			continue
		}
		text := "{{ " + path + " }}"
		if full, projected := renderTemplate(t, text, pod, node), renderTemplate(t, text, projectedPod, projectedNode); full != projected {
			t.Errorf("%s renders %q from the full objects but %q from the full projection", text, full, projected)
		}
	}
	if projectedPod.ManagedFields != nil || projectedNode.ManagedFields != nil {
		t.Error("the full projection keeps managedFields")
	}
}

func TestProjectPodKeepsWhatTheControllerReads(t *testing.T) {
	pod, _ := richPodAndNode()
	got := ProjectPod(pod, TemplateReach(mustParse(t, nsSATemplate)))
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, Labels: pod.Labels, DeletionTimestamp: pod.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: pod.Spec.NodeName, ServiceAccountName: pod.Spec.ServiceAccountName},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions[:1]},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ProjectPod (-want +got):\n%s", diff)
	}
}

func TestProjectNamespaceAndEndpointSlice(t *testing.T) {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", UID: "u", ResourceVersion: "3", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"big": strings.Repeat("x", 100)}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
	}
	wantNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", UID: "u", ResourceVersion: "3", Labels: map[string]string{"team": "a"}}}
	if diff := cmp.Diff(wantNS, ProjectNamespace(ns)); diff != "" {
		t.Errorf("ProjectNamespace (-want +got):\n%s", diff)
	}

	slice := withConditions(endpointSlice("prod", "web-abc", "web", "web-0", "web-1"), "", ptr.To(false), ptr.To(true))
	slice.Labels["endpointslice.kubernetes.io/managed-by"] = "endpointslice-controller.k8s.io"
	slice.Endpoints[0].Addresses = []string{"10.0.0.1"}
	slice.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http")}}
	projected := ProjectEndpointSlice(slice)
	if projected.Endpoints[0].Addresses != nil || projected.Ports != nil || len(projected.Labels) != 1 {
		t.Errorf("ProjectEndpointSlice kept what nothing reads: %+v", projected)
	}
	for _, pod := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web-0"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web-2"}},
	} {
		if diff := cmp.Diff(ServicesOfPod([]*discoveryv1.EndpointSlice{slice}, pod),
			ServicesOfPod([]*discoveryv1.EndpointSlice{projected}, pod)); diff != "" {
			t.Errorf("ServicesOfPod of %s changed by the projection (-full +projected):\n%s", pod.Name, diff)
		}
	}
	if diff := cmp.Diff(SliceListedPods(slice), SliceListedPods(projected)); diff != "" {
		t.Errorf("SliceListedPods changed by the projection (-full +projected):\n%s", diff)
	}
	if diff := cmp.Diff(SlicePods(slice), SlicePods(projected)); diff != "" {
		t.Errorf("SlicePods changed by the projection (-full +projected):\n%s", diff)
	}
}

func mustParse(t *testing.T, text string) *template.Template {
	t.Helper()
	tmpl, err := parseTemplate("t", text)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl.Template
}

// TestCompactPodReachRendersAsTheFullPod renders every template whose reach a compact cached
// pod keeps through the full pod and through the projection to CompactPodReach, which is what
// a compact pod expands to: the output must not change.
func TestCompactPodReachRendersAsTheFullPod(t *testing.T) {
	pod, node := richPodAndNode()
	compact := ProjectPod(pod, CompactPodReach())
	kept := CompactPodReach()
	covered := 0
	for _, root := range templateObjects[:2] {
		for _, path := range fieldPaths(root.expr, root.typ, 6) {
			text := "{{ " + path + " }}"
			reach := TemplateReach(mustParse(t, text))
			if !kept.PodMeta.Covers(reach.PodMeta) || !kept.PodSpec.Covers(reach.PodSpec) {
				continue
			}
			covered++
			if full, got := renderTemplate(t, text, pod, node), renderTemplate(t, text, compact, node); full != got {
				t.Errorf("%s renders %q from the full pod but %q from the compact projection", text, full, got)
			}
		}
	}
	// Name, Namespace, UID, ResourceVersion, CreationTimestamp, DeletionTimestamp (and its
	// fields), Labels, NodeName and ServiceAccountName.
	if covered < 9 {
		t.Errorf("only %d templates are within the compact reach: the walk is broken", covered)
	}
}
