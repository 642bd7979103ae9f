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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
