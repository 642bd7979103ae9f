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
	"text/template"
	"text/template/parse"

	corev1 "k8s.io/api/core/v1"
)

// A fieldPlan renders, without text/template, a template that only joins literal text and
// string fields of the data, as nearly every SPIFFE ID, DNS name and selector template does.
// text/template walks such a template by reflection and allocates on every action; a full
// resync renders every entry again, and at 300k entries that walk was a third of its CPU.
type fieldPlan []planPart

// planPart is literal text, or a field of the data when field is set.
type planPart struct {
	text  string
	field stringField
}

// stringField reads one string of the data; ok is false when a pointer on the way is nil,
// where text/template fails with an error of its own.
type stringField func(in *renderInput) (value string, ok bool)

// stringFields are the fields a plan can read, by their path in a template. Only fields of
// kind string print as themselves, so they are the only ones listed.
var stringFields = map[string]stringField{
	"TrustDomain":                func(in *renderInput) (string, bool) { return in.trustDomain, true },
	"ClusterName":                func(in *renderInput) (string, bool) { return in.clusterName, true },
	"ClusterDomain":              func(in *renderInput) (string, bool) { return in.clusterDomain, true },
	"PodMeta.Name":               podField(func(p *corev1.Pod) string { return p.Name }),
	"PodMeta.Namespace":          podField(func(p *corev1.Pod) string { return p.Namespace }),
	"PodMeta.GenerateName":       podField(func(p *corev1.Pod) string { return p.GenerateName }),
	"PodMeta.UID":                podField(func(p *corev1.Pod) string { return string(p.UID) }),
	"PodSpec.ServiceAccountName": podField(func(p *corev1.Pod) string { return p.Spec.ServiceAccountName }),
	"PodSpec.NodeName":           podField(func(p *corev1.Pod) string { return p.Spec.NodeName }),
	"PodSpec.Hostname":           podField(func(p *corev1.Pod) string { return p.Spec.Hostname }),
	"PodSpec.Subdomain":          podField(func(p *corev1.Pod) string { return p.Spec.Subdomain }),
	"NodeMeta.Name":              nodeField(func(n *corev1.Node) string { return n.Name }),
	"NodeMeta.UID":               nodeField(func(n *corev1.Node) string { return string(n.UID) }),
}

// podField and nodeField read a string of the pod or the node; strings are immutable, so
// the plan reads the objects themselves.
func podField(get func(p *corev1.Pod) string) stringField {
	return func(in *renderInput) (string, bool) {
		if in.pod == nil {
			return "", false
		}
		return get(in.pod), true
	}
}

func nodeField(get func(n *corev1.Node) string) stringField {
	return func(in *renderInput) (string, bool) {
		if in.node == nil {
			return "", false
		}
		return get(in.node), true
	}
}

// planFor returns the plan of a template, or nil when it does anything but join text, the
// fields above and labels or annotations looked up with index: another function, a pipeline,
// a variable, a condition, a loop or a defined template.
func planFor(t *template.Template) fieldPlan {
	if t.Tree == nil || t.Root == nil || len(t.Templates()) != 1 {
		return nil
	}
	plan := make(fieldPlan, 0, len(t.Root.Nodes))
	for _, node := range t.Root.Nodes {
		switch n := node.(type) {
		case *parse.TextNode:
			plan = append(plan, planPart{text: string(n.Text)})
		case *parse.ActionNode:
			field := fieldOf(n.Pipe)
			if field == nil {
				return nil
			}
			plan = append(plan, planPart{field: field})
		default:
			return nil
		}
	}
	return plan
}

// fieldOf is the string field a pipeline prints, when it is a bare field reference or a label
// or annotation looked up with index.
func fieldOf(pipe *parse.PipeNode) stringField {
	if pipe == nil || len(pipe.Decl) > 0 || len(pipe.Cmds) != 1 {
		return nil
	}
	switch args := pipe.Cmds[0].Args; len(args) {
	case 1:
		if field, ok := args[0].(*parse.FieldNode); ok {
			return stringFields[strings.Join(field.Ident, ".")]
		}
	case 3:
		fn, isIdent := args[0].(*parse.IdentifierNode)
		field, isField := args[1].(*parse.FieldNode)
		key, isString := args[2].(*parse.StringNode)
		if isIdent && fn.Ident == "index" && isField && isString {
			if labels := stringMaps[strings.Join(field.Ident, ".")]; labels != nil {
				return func(in *renderInput) (string, bool) {
					m, ok := labels(in)
					return m[key.Text], ok // index gives "" for a missing key.
				}
			}
		}
	}
	return nil
}

// stringMaps are the maps of strings a plan can look a key up in.
var stringMaps = map[string]func(in *renderInput) (map[string]string, bool){
	"PodMeta.Labels":       podMap(func(p *corev1.Pod) map[string]string { return p.Labels }),
	"PodMeta.Annotations":  podMap(func(p *corev1.Pod) map[string]string { return p.Annotations }),
	"NodeMeta.Labels":      nodeMap(func(n *corev1.Node) map[string]string { return n.Labels }),
	"NodeMeta.Annotations": nodeMap(func(n *corev1.Node) map[string]string { return n.Annotations }),
}

func podMap(get func(p *corev1.Pod) map[string]string) func(in *renderInput) (map[string]string, bool) {
	return func(in *renderInput) (map[string]string, bool) {
		if in.pod == nil {
			return nil, false
		}
		return get(in.pod), true
	}
}

func nodeMap(get func(n *corev1.Node) map[string]string) func(in *renderInput) (map[string]string, bool) {
	return func(in *renderInput) (map[string]string, bool) {
		if in.node == nil {
			return nil, false
		}
		return get(in.node), true
	}
}

// render joins the plan's parts over data; ok is false when text/template must run instead,
// to fail as it does: a nil object on the way, or an output past maxRenderedBytes.
func (p fieldPlan) render(in *renderInput) (string, bool) {
	var b strings.Builder
	for _, part := range p {
		if part.field == nil {
			b.WriteString(part.text)
			continue
		}
		value, ok := part.field(in)
		if !ok {
			return "", false
		}
		b.WriteString(value)
	}
	if b.Len() > maxRenderedBytes {
		return "", false
	}
	return b.String(), true
}
