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

	corev1 "k8s.io/api/core/v1"
)

// executeTextTemplate renders t by text/template alone, as execute does without a plan.
func executeTextTemplate(t *compiledTemplate, data *renderInput) (string, error) {
	return execute(&compiledTemplate{Template: t.Template}, data)
}

// TestPlannedTemplatesAreTheCommonOnes checks that the templates users write, the Helm
// chart's and the default parent ID among them, get a plan, and that anything else does not.
func TestPlannedTemplatesAreTheCommonOnes(t *testing.T) {
	for text, planned := range map[string]bool{
		"spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}": true,
		"spiffe://{{ .TrustDomain }}/spire/agent/k8s_psat/{{ .ClusterName }}/{{ .NodeMeta.UID }}":      true,
		"{{- .PodMeta.Name -}}.{{ .PodMeta.Namespace }}.svc.{{ .ClusterDomain }}":                      true,
		"k8s:pod-uid:{{ .PodMeta.UID }}": true,
		"no action at all":               true,
		"{{ .PodMeta.Labels.app }}":      false,
		`{{ index .PodMeta.Labels "app" }}.{{ index .NodeMeta.Annotations "a" }}`: true,
		`{{ index .PodMeta.Labels "app" "x" }}`:                                   false,
		`{{ index .PodSpec.NodeSelector "app" }}`:                                 false,
		`{{ printf "%s" .PodMeta.Name }}`:                                         false,
		"{{ .PodMeta.Name | printf }}":                                            false,
		"{{ $.PodMeta.Name }}":                                                    false,
		"{{ $n := .PodMeta.Name }}{{ $n }}":                                       false,
		"{{ if .PodMeta.Name }}x{{ end }}":                                        false,
		"{{ (.PodMeta.Name) }}":                                                   false,
		`{{ define "n" }}{{ .PodMeta.Name }}{{ end }}{{ .PodMeta.Name }}`:         false,
		"{{ .PodSpec.Priority }}":                                                 false,
		"{{ .PodMeta.CreationTimestamp }}":                                        false,
	} {
		tmpl, err := parseTemplate("t", text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if got := tmpl.plan != nil; got != planned {
			t.Errorf("%s: planned %v, want %v", text, got, planned)
		}
	}
}

// TestPlanRendersAsTextTemplate renders every field path of the data, each alone and between
// literal text, over a rich pod, a pod whose objects are missing and a pod whose name is too
// long for any output, through the plan and through text/template: output and error must be
// the same.
func TestPlanRendersAsTextTemplate(t *testing.T) {
	pod, node := richPodAndNode()
	long := pod.DeepCopy()
	long.Name = strings.Repeat("n", maxRenderedBytes)
	datas := map[string]func() *renderInput{
		"rich":        func() *renderInput { return inputOf("example.org", pod, node) },
		"long name":   func() *renderInput { return inputOf("example.org", long, node) },
		"no pod":      func() *renderInput { return inputOf("example.org", nil, node) },
		"no node":     func() *renderInput { return inputOf("example.org", pod, nil) },
		"empty":       func() *renderInput { return inputOf("", nil, nil) },
		"empty pod":   func() *renderInput { return inputOf("example.org", &corev1.Pod{}, node) },
		"long domain": func() *renderInput { return inputOf(strings.Repeat("d", maxRenderedBytes+1), nil, nil) },
	}
	var paths []string
	for _, root := range templateObjects {
		paths = append(paths, fieldPaths(root.expr, root.typ, 1)...)
	}
	paths = append(paths, ".TrustDomain", ".ClusterName", ".ClusterDomain")

	planned := 0
	for _, path := range paths {
		for _, text := range []string{"{{ " + path + " }}", "spiffe://x/{{ .TrustDomain }}/{{- " + path + " -}} /end"} {
			tmpl, err := parseTemplate("t", text)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			if tmpl.plan == nil {
				continue
			}
			planned++
			for name, data := range datas {
				want, wantErr := executeTextTemplate(tmpl, data())
				got, gotErr := execute(tmpl, data())
				if got != want || errString(gotErr) != errString(wantErr) {
					t.Errorf("%s over the %s data: the plan gives %q, %v; text/template %q, %v", text, name, got, gotErr, want, wantErr)
				}
			}
		}
	}
	if planned != 2*len(stringFields) {
		t.Errorf("%d templates had a plan, want %d: every string field, in two templates", planned, 2*len(stringFields))
	}
}

// FuzzPlanMatchesTextTemplate renders any template that gets a plan, over a pod of any
// name, namespace and service account, through the plan and through text/template.
func FuzzPlanMatchesTextTemplate(f *testing.F) {
	for _, text := range []string{
		"spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
		"{{- .PodMeta.Name -}}.{{ .PodMeta.Namespace }}.svc.{{ .ClusterDomain }}",
		"k8s:pod-uid:{{ .PodMeta.UID }}{{/* comment */}}",
		"{{ .NodeMeta.Name }}{{ .PodSpec.NodeName }}",
		`{{ index .PodMeta.Labels "app" }}/{{ index .PodMeta.Labels "web" }}`,
	} {
		f.Add(text, "web-0", "shop", "api")
	}
	f.Fuzz(func(t *testing.T, text, name, namespace, serviceAccount string) {
		tmpl, err := parseTemplate("t", text)
		if err != nil || tmpl.plan == nil {
			return
		}
		pod, node := testPod(), testNode()
		pod.Name, pod.Namespace, pod.Spec.ServiceAccountName = name, namespace, serviceAccount
		want, wantErr := executeTextTemplate(tmpl, inputOf("example.org", pod, node))
		got, gotErr := execute(tmpl, inputOf("example.org", pod, node))
		if got != want || errString(gotErr) != errString(wantErr) {
			t.Errorf("%q: the plan gives %q, %v; text/template %q, %v", text, got, gotErr, want, wantErr)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// BenchmarkRenderSPIFFEID renders the Helm chart's SPIFFE ID template, through its plan and
// through text/template.
func BenchmarkRenderSPIFFEID(b *testing.B) {
	tmpl, err := parseTemplate("t", "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}")
	if err != nil {
		b.Fatal(err)
	}
	pod := testPod()
	for name, run := range map[string]func(*compiledTemplate, *renderInput) (string, error){
		"plan": execute, "text-template": executeTextTemplate,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := run(tmpl, inputOf("example.org", pod, nil)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
