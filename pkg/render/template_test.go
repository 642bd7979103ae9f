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
	"testing"
)

// Only templates that can run a node twice carry the counters (and pay a clone per
// execution); the others render as parsed. Both must render the same text.
func TestOnlyTemplatesThatRepeatAreInstrumented(t *testing.T) {
	for _, tc := range []struct {
		text         string
		instrumented bool
		want         string
	}{
		{"spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}", false,
			"spiffe://example.org/ns/" + testPod().Namespace + "/sa/" + testPod().Spec.ServiceAccountName},
		{`{{ if .PodMeta.Labels }}{{ with .PodMeta.Name }}{{ printf "%s-x" . }}{{ end }}{{ else }}none{{ end }}`, false,
			testPod().Name + "-x"},
		{"{{ range $k, $v := .PodMeta.Labels }}{{ $k }}{{ end }}", true, ""},
		{`{{ define "n" }}{{ .PodMeta.Name }}{{ end }}{{ template "n" . }}`, true, testPod().Name},
		{`{{ if true }}{{ range 2 }}x{{ end }}{{ end }}`, true, "xx"},
	} {
		tmpl, err := parseTemplate("t", tc.text)
		if err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		if got := instrumented(tmpl.Template); got != tc.instrumented {
			t.Errorf("%s: instrumented %v, want %v", tc.text, got, tc.instrumented)
		}
		got, err := execute(tmpl, inputOf("example.org", testPod(), nil))
		if err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("%s: rendered %q, want %q", tc.text, got, tc.want)
		}
	}
}
