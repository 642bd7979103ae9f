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
	"reflect"
	"strings"
	"testing"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// allReach is every field of every object.
var allReach = Reach{PodMeta: FieldSet{All: true}, PodSpec: FieldSet{All: true}, NodeMeta: FieldSet{All: true}, NodeSpec: FieldSet{All: true}}

// inputOf is the render input of a pod on a node (either may be nil) in which templates can
// read every field.
func inputOf(trustDomain string, pod *corev1.Pod, node *corev1.Node) *renderInput {
	return &renderInput{trustDomain: trustDomain, clusterName: "c", clusterDomain: "cluster.local", pod: pod, node: node, reach: allReach}
}

// scmTemplateData is spire-controller-manager v0.7.0's template data
// (pkg/spireentry/entries.go): pointers to the objects themselves.
type scmTemplateData struct {
	TrustDomain   string
	ClusterName   string
	ClusterDomain string
	PodMeta       *metav1.ObjectMeta
	PodSpec       *corev1.PodSpec
	NodeMeta      *metav1.ObjectMeta
	NodeSpec      *corev1.NodeSpec
}

// scmData is what spire-controller-manager renders a pod's templates over.
func scmData(trustDomain string, pod *corev1.Pod, node *corev1.Node) *scmTemplateData {
	d := &scmTemplateData{TrustDomain: trustDomain, ClusterName: "c", ClusterDomain: "cluster.local"}
	if pod != nil {
		d.PodMeta, d.PodSpec = &pod.ObjectMeta, &pod.Spec
	}
	if node != nil {
		d.NodeMeta, d.NodeSpec = &node.ObjectMeta, &node.Spec
	}
	return d
}

// scmRender renders a template as spire-controller-manager v0.7.0 does: text/template over
// the objects, into a buffer.
func scmRender(text string, data *scmTemplateData) (string, error) {
	t, err := template.New("t").Parse(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = t.Execute(&b, data)
	return b.String(), err
}

// TestTemplateViewHasNoMethods walks every type a template can reach in its view, from a
// view of a pod and a node in which every field is set, and fails if any of them, or a pointer
// to one, has a method a template could call.
func TestTemplateViewHasNoMethods(t *testing.T) {
	view := sampleInput(fuzzTrustDomain).templateView()
	seen := map[reflect.Type]bool{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		if !v.IsValid() {
			return
		}
		typ := v.Type()
		if typ.Kind() != reflect.Interface && !seen[typ] {
			seen[typ] = true
			for _, mt := range []reflect.Type{typ, reflect.PointerTo(typ)} {
				if mt.NumMethod() > 0 {
					t.Errorf("%s: type %s has method %s, which a template could call", path, mt, mt.Method(0).Name)
				}
			}
		}
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			walk(v.Elem(), path)
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), path+"[]")
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Key(), path+"{key}")
				walk(it.Value(), path+"{}")
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+typ.Field(i).Name)
			}
		}
	}
	walk(reflect.ValueOf(view), "")
	if len(seen) < 100 {
		t.Errorf("walked %d types, fewer than a pod and a node have: the sample is not complete", len(seen))
	}
	t.Logf("%d types reachable, none with a method", len(seen))
}

// scmTemplates are the templates spire-controller-manager v0.7.0 documents
// (docs/clusterspiffeid-crd.md, its default parent ID template), those the SPIRE Helm chart
// (spiffe/helm-charts-hardened, charts/spire/charts/spire-server/values.yaml and
// templates/controller-manager-cluster-ids.yaml) sets by default or offers commented out, and
// one for each field those use and each kind of value a template may print: a timestamp, a
// UID, a quantity, an int-or-string, labels, a bool, a number, a nil pointer and a missing key.
var scmTemplates = []string{
	"spiffe://{{ .TrustDomain }}/spire/agent/k8s_psat/{{ .ClusterName }}/{{ .NodeMeta.UID }}",
	"spiffe://domain.test/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
	"{{ .PodMeta.Name }}.{{ .PodMeta.Namespace }}.{{ .ClusterDomain }}",
	"spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
	`{{ index .PodMeta.Labels "app.kubernetes.io/name" }}.{{ .PodMeta.Namespace }}.svc.cluster.local`,
	"oidc-discovery.{{ .TrustDomain }}",
	"spiffe://{{ .TrustDomain }}/spike/keeper/{{ .PodMeta.Name }}",
	"spiffe://{{ .TrustDomain }}/spire-identity-exchange/{{ .PodMeta.Name }}",
	"{{ .PodMeta.UID }}|{{ .NodeMeta.Name }}|{{ .PodSpec.NodeName }}|{{ .PodMeta.GenerateName }}",
	"{{ .PodMeta.CreationTimestamp }}|{{ .PodMeta.DeletionTimestamp }}|{{ .NodeMeta.CreationTimestamp }}",
	"{{ (index .PodSpec.Volumes 0).EmptyDir.SizeLimit }}|{{ (index .PodSpec.Volumes 0).EmptyDir.Medium }}",
	"{{ (index (index .PodSpec.Containers 0).Ports 0).ContainerPort }}|{{ (index .PodSpec.Containers 0).LivenessProbe.HTTPGet.Port }}",
	"{{ .PodMeta.Labels.app }}|{{ .PodMeta.Labels.missing }}|{{ index .PodMeta.Annotations \"note\" }}|{{ len .PodMeta.Labels }}",
	"{{ range $k, $v := .PodMeta.Labels }}{{ $k }}={{ $v }};{{ end }}",
	"{{ .PodSpec.HostNetwork }}|{{ .PodSpec.Priority }}|{{ .PodSpec.SecurityContext }}|{{ .NodeSpec.Unschedulable }}|{{ .NodeSpec.PodCIDR }}",
	"{{ with .PodSpec.SecurityContext }}{{ .RunAsUser }}{{ else }}none{{ end }}",
	"{{ range .PodSpec.Containers }}{{ .Name }}:{{ .Image }} {{ end }}",
	"{{ (index .PodSpec.Containers 0).Args }}|{{ .PodSpec.NodeSelector }}|{{ (index .NodeMeta.OwnerReferences 0).Kind }}",
	"{{ .NodeMeta.Labels }}",
	"{{ if eq .PodSpec.ServiceAccountName \"web\" }}web{{ end }}{{ printf \"%s-%d\" .PodMeta.Name 7 }}",
}

// scmPods are the pods and nodes the comparison renders over: an ordinary one, one with
// every field the templates above read set, and one on no node.
func scmPods() []struct {
	name string
	pod  *corev1.Pod
	node *corev1.Node
} {
	full := testPod()
	limit := resource.MustParse("1Gi")
	full.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 27, 20, 42, 2, 0, time.UTC).Local())
	full.Labels["app.kubernetes.io/name"] = "web"
	full.Annotations = map[string]string{"note": "<&>"}
	full.GenerateName = "web-"
	full.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit, Medium: "Memory"}}}}
	full.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1", Args: []string{"a", "b"},
		Ports:         []corev1.ContainerPort{{ContainerPort: 8080}},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}}}
	full.Spec.HostNetwork = true
	full.Spec.NodeSelector = map[string]string{"zone": "a"}
	node := testNode()
	node.Labels = map[string]string{"kubernetes.io/hostname": "node-1"}
	node.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Local())
	node.OwnerReferences = []metav1.OwnerReference{{Kind: "Machine"}}
	node.Spec.PodCIDR = "10.0.0.0/24"
	return []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
	}{{"ordinary", testPod(), testNode()}, {"full", full, node}, {"no node", full, nil}}
}

// TestTemplatesRenderAsSCM renders spire-controller-manager's documented templates, the
// chart's and one for each field they use through spire-controller-manager's engine
// (text/template over the objects, as pkg/spireentry does) and through ours over the view:
// the output must be the same, or both fail. Go's default printing of structs and lists that hold
// pointers differs by the addresses only, which are the view's own.
func TestTemplatesRenderAsSCM(t *testing.T) {
	for _, p := range scmPods() {
		for _, text := range scmTemplates {
			want, wantErr := scmRender(text, scmData("example.org", p.pod, p.node))
			tmpl, err := parseTemplate("t", text)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			got, gotErr := execute(tmpl, inputOf("example.org", p.pod, p.node))
			if (gotErr == nil) != (wantErr == nil) || gotErr == nil && addresses.ReplaceAllString(got, "0x") != addresses.ReplaceAllString(want, "0x") {
				t.Errorf("%s over the %s pod:\nours %q, %v\nSCM  %q, %v", text, p.name, got, gotErr, want, wantErr)
			}
		}
	}
}
