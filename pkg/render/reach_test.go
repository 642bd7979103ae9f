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

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/sets"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
)

func fields(names ...string) FieldSet { return FieldSet{Fields: sets.New(names...)} }

var all = FieldSet{All: true}

func TestTemplateReach(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Reach
	}{
		{"constants only", "spiffe://{{ .TrustDomain }}/{{ .ClusterName }}", Reach{}},
		{"namespace and service account", nsSATemplate,
			Reach{PodMeta: fields("Namespace"), PodSpec: fields("ServiceAccountName")}},
		{"label through index", `{{ index .PodMeta.Labels "app" }}`, Reach{PodMeta: fields("Labels")}},
		{"map key chain", `{{ .PodMeta.Labels.app }}{{ .NodeMeta.Name }}{{ .NodeSpec.ProviderID }}`,
			Reach{PodMeta: fields("Labels"), NodeMeta: fields("Name"), NodeSpec: fields("ProviderID")}},
		{"deep path keeps the top-level field", `{{ (index .PodSpec.Containers 0).Image }}`, Reach{PodSpec: fields("Containers")}},
		{"parenthesised object", `{{ (.PodSpec).Hostname }}`, Reach{PodSpec: fields("Hostname")}},
		{"with on an object", `{{ with .PodSpec }}{{ .Hostname }}{{ end }}`, Reach{PodSpec: fields("Hostname")}},
		{"with else keeps the outer dot", `{{ with .PodSpec.Hostname }}{{ . }}{{ else }}{{ .PodMeta.Name }}{{ end }}`,
			Reach{PodSpec: fields("Hostname"), PodMeta: fields("Name")}},
		{"if reads its condition", `{{ if .PodSpec.HostNetwork }}h{{ end }}`, Reach{PodSpec: fields("HostNetwork")}},
		{"variable bound to an object", `{{ $s := .PodSpec }}{{ $s.Subdomain }}`, Reach{PodSpec: fields("Subdomain")}},
		{"dollar", `{{ with .PodSpec.Hostname }}{{ $.PodMeta.Name }}{{ end }}`,
			Reach{PodSpec: fields("Hostname"), PodMeta: fields("Name")}},
		{"range over a field", `{{ range $k, $v := .PodMeta.Labels }}{{ $k }}{{ $v }}{{ . }}{{ end }}`, Reach{PodMeta: fields("Labels")}},
		{"range over an object", `{{ range .PodSpec }}{{ end }}`, Reach{PodSpec: all}},
		{"printed object", `{{ .PodSpec }}`, Reach{PodSpec: all}},
		{"printed data", `{{ . }}`, Reach{PodMeta: all, PodSpec: all, NodeMeta: all, NodeSpec: all}},
		{"function argument", `{{ printf "%v" .NodeSpec }}`, Reach{NodeSpec: all}},
		{"index on an object", `{{ index .PodMeta "Labels" }}`, Reach{PodMeta: all}},
		{"piped object", `{{ .PodMeta | printf "%v" }}`, Reach{PodMeta: all}},
		{"method, which fails", `{{ .PodMeta.GetLabels }}`, Reach{}},
		{"variable reassigned", `{{ $x := .PodMeta }}{{ $x = .NodeMeta }}{{ $x.Name }}`, Reach{PodMeta: all, NodeMeta: all}},
		{"variable scope ends with its block", `{{ $x := .PodMeta }}{{ with .PodSpec.Hostname }}{{ $x := $.NodeMeta }}{{ end }}{{ $x.Labels }}`,
			Reach{PodMeta: fields("Labels"), PodSpec: fields("Hostname")}},
		{"template called with an object", `{{ define "sa" }}{{ .ServiceAccountName }}{{ end }}{{ template "sa" .PodSpec }}`,
			Reach{PodSpec: fields("ServiceAccountName")}},
		{"template called with the data", `{{ define "n" }}{{ .PodMeta.Name }}{{ end }}{{ template "n" . }}`,
			Reach{PodMeta: fields("Name")}},
		{"recursive template", `{{ define "r" }}{{ .PodMeta.Name }}{{ template "r" . }}{{ end }}{{ template "r" . }}`,
			Reach{PodMeta: fields("Name")}},
		{"block", `{{ block "b" .NodeMeta }}{{ .UID }}{{ end }}`, Reach{NodeMeta: fields("UID")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := parseTemplate("t", tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, TemplateReach(tmpl.Template), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("TemplateReach(%q) (-want +got):\n%s", tc.text, diff)
			}
		})
	}
}

func TestClusterSPIFFEIDReachCoversAllItsTemplates(t *testing.T) {
	c := testClusterSPIFFEID(spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:          nsSATemplate,
		DNSNameTemplates:          []string{"{{ .PodSpec.Hostname }}.example.org"},
		WorkloadSelectorTemplates: []string{"k8s:node-name:{{ .NodeMeta.Name }}"},
	})
	want := Reach{PodMeta: fields("Namespace"), PodSpec: fields("ServiceAccountName", "Hostname"), NodeMeta: fields("Name")}
	if diff := cmp.Diff(want, c.reach, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Reach (-want +got):\n%s", diff)
	}
	r := newTestRenderer(t, config.DefaultParentIDTemplate)
	if diff := cmp.Diff(Reach{NodeMeta: fields("UID")}, r.reach, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Reach of parent ID template %q (-want +got):\n%s", config.DefaultParentIDTemplate, diff)
	}
}
