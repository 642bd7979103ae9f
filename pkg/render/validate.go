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
	"errors"
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// ValidateClusterSPIFFEID checks a ClusterSPIFFEID with the controller's own compile and render
// code, for an admission webhook. It refuses only what is wrong for every pod, and so what
// CEL cannot see: templates that do not parse, refer to fields the template data lacks, or call
// templates that do not exist; SPIFFE IDs whose literal start puts them outside the trust
// domain; literal workload selectors and DNS names that are malformed; malformed label
// selectors and federatesWith trust domains. What depends on a pod's data (a label's value,
// say) is left to rendering. trustDomain may be empty, and then no ID is checked against it.
// Every error names its field.
func ValidateClusterSPIFFEID(obj *spirev1alpha1.ClusterSPIFFEID, trustDomain string) field.ErrorList {
	spec := &obj.Spec
	specPath := field.NewPath("spec")
	var errs field.ErrorList

	// Over the caps of one object, the templates are not even parsed: the refusal costs
	// nothing, whatever their number.
	if _, err := templatesCost(spec); err != nil {
		if p := firstTooLong(specPath, spec); p != nil {
			return field.ErrorList{field.TooLong(p, "", maxTemplateBytes)}
		}
		return field.ErrorList{field.Invalid(specPath, "", err.Error())}
	}

	td, tdErr := spiffeid.TrustDomainFromString(trustDomain)
	if trustDomain == "" || tdErr != nil {
		td = spiffeid.TrustDomain{}
	}
	// All the templates run within one budget, as they do when an entry is rendered.
	sample := sampleInput(td)
	sample.budget = &budget{}

	idPath := specPath.Child("spiffeIDTemplate")
	if spec.SPIFFEIDTemplate == "" {
		errs = append(errs, field.Required(idPath, "the SPIFFE ID template is required"))
	} else if t, err := validateTemplate(idPath, spec.SPIFFEIDTemplate, sample); err != nil {
		errs = append(errs, err)
	} else if err := validateSPIFFEIDPrefix(idPath, spec.SPIFFEIDTemplate, t, td); err != nil {
		errs = append(errs, err)
	}
	for i, text := range spec.DNSNameTemplates {
		p := specPath.Child("dnsNameTemplates").Index(i)
		if t, err := validateTemplate(p, text, sample); err != nil {
			errs = append(errs, err)
		} else if literal, ok := literalText(t); ok {
			if err := validateDNSName(literal); err != nil {
				errs = append(errs, field.Invalid(p, text, err.Error()))
			}
		}
	}
	for i, text := range spec.WorkloadSelectorTemplates {
		p := specPath.Child("workloadSelectorTemplates").Index(i)
		t, err := validateTemplate(p, text, sample)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if literal, ok := literalText(t); ok {
			if _, err := parseSelector(literal); err != nil {
				errs = append(errs, field.Invalid(p, text, err.Error()))
				continue
			}
		}
		if strings.HasPrefix(leadingText(t), "k8s:"+PodUIDSelectorPrefix) {
			errs = append(errs, field.Invalid(p, text, "the k8s:"+PodUIDSelectorPrefix+" selector is reserved: the controller adds the pod's own"))
		}
	}

	opts := metav1validation.LabelSelectorValidationOptions{}
	if spec.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.NamespaceSelector, opts, specPath.Child("namespaceSelector"))...)
	}
	if spec.PodSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.PodSelector, opts, specPath.Child("podSelector"))...)
	}
	for i, name := range spec.FederatesWith {
		if _, err := spiffeid.TrustDomainFromString(name); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("federatesWith").Index(i), name, err.Error()))
		}
	}
	if spec.TTL.Duration < 0 {
		errs = append(errs, field.Invalid(specPath.Child("ttl"), spec.TTL.Duration.String(), "must not be negative"))
	}
	if spec.JWTTTL.Duration < 0 {
		errs = append(errs, field.Invalid(specPath.Child("jwtTtl"), spec.JWTTTL.Duration.String(), "must not be negative"))
	}
	return errs
}

// firstTooLong is the path of the first template longer than maxTemplateBytes, if any.
func firstTooLong(specPath *field.Path, spec *spirev1alpha1.ClusterSPIFFEIDSpec) *field.Path {
	if len(spec.SPIFFEIDTemplate) > maxTemplateBytes {
		return specPath.Child("spiffeIDTemplate")
	}
	for i, text := range spec.DNSNameTemplates {
		if len(text) > maxTemplateBytes {
			return specPath.Child("dnsNameTemplates").Index(i)
		}
	}
	for i, text := range spec.WorkloadSelectorTemplates {
		if len(text) > maxTemplateBytes {
			return specPath.Child("workloadSelectorTemplates").Index(i)
		}
	}
	return nil
}

// validateTemplate parses a template as the controller does and renders it over a sample in
// which every field is set, so that the errors that remain are the template's own: a field
// the data lacks, a template that is not defined, a wrong number of arguments. A map key that
// is missing is no error: labels and annotations vary from pod to pod.
func validateTemplate(p *field.Path, text string, sample *renderInput) (*template.Template, *field.Error) {
	if len(text) > maxTemplateBytes {
		return nil, field.TooLong(p, "", maxTemplateBytes)
	}
	t, err := parseTemplate(p.String(), text)
	if err != nil {
		return nil, field.Invalid(p, text, err.Error())
	}
	if sample.budget.spent() {
		// An earlier template spent the object's budget, and said so: this one is only
		// parsed, so that one error does not repeat for every template.
		return t.Template, nil
	}
	if _, err := execute(t, sample); err != nil && isTemplateError(err) {
		return nil, field.Invalid(p, text, err.Error())
	}
	return t.Template, nil
}

// isTemplateError reports whether an execution error over the complete sample is the
// template's fault whatever the pod: it names something that does not exist, prints a value
// whose printed size nothing bounds, gives printf a width it refuses, or loops, recurses or
// builds strings beyond the bounds on data smaller than any real pod's.
func isTemplateError(err error) bool {
	if errors.Is(err, errIterationsExceeded) || errors.Is(err, errCallsExceeded) || errors.Is(err, errMemoryExceeded) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"can't evaluate field", "no such template", "not defined", "wrong number of args",
		"printf width or precision", "range can't iterate"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// validateSPIFFEIDPrefix refuses a SPIFFE ID template whose literal start already decides that
// the ID is not one, or that it is outside the trust domain. An action before the end of the
// trust domain could produce anything, so such templates are left to rendering.
func validateSPIFFEIDPrefix(p *field.Path, text string, t *template.Template, td spiffeid.TrustDomain) *field.Error {
	const scheme = "spiffe://"
	prefix := leadingText(t)
	_, complete := literalText(t)
	if !strings.HasPrefix(prefix, scheme) {
		if complete || len(prefix) >= len(scheme) || !strings.HasPrefix(scheme, prefix) {
			return field.Invalid(p, text, "must render a SPIFFE ID, which starts with "+scheme)
		}
		return nil
	}
	authority, _, hasPath := strings.Cut(strings.TrimPrefix(prefix, scheme), "/")
	if !hasPath && !complete {
		return nil
	}
	if complete {
		if _, err := spiffeid.FromString(prefix); err != nil {
			return field.Invalid(p, text, "invalid SPIFFE ID: "+err.Error())
		}
	}
	if !td.IsZero() && authority != td.Name() {
		return field.Invalid(p, text, fmt.Sprintf("the SPIFFE ID is outside trust domain %q", td.Name()))
	}
	return nil
}

// leadingText is the literal text a template starts with, before its first action.
func leadingText(t *template.Template) string {
	var b strings.Builder
	for _, n := range t.Root.Nodes {
		text, ok := n.(*parse.TextNode)
		if !ok {
			if isCallAction(n) {
				continue
			}
			break
		}
		b.Write(text.Text)
	}
	return b.String()
}

// literalText returns a template's text when it has no action at all.
func literalText(t *template.Template) (string, bool) {
	for _, n := range t.Root.Nodes {
		if _, ok := n.(*parse.TextNode); !ok && !isCallAction(n) {
			return "", false
		}
	}
	return leadingText(t), true
}

// sampleInput is a render input in which every pointer, slice and map the templates can reach
// holds a value, so that a field reference fails only when the field does not exist.
func sampleInput(td spiffeid.TrustDomain) *renderInput {
	in := &renderInput{trustDomain: td.Name(), clusterName: "cluster", clusterDomain: "cluster.local",
		pod: &corev1.Pod{}, node: &corev1.Node{}, reach: Reach{PodMeta: FieldSet{All: true}, PodSpec: FieldSet{All: true},
			NodeMeta: FieldSet{All: true}, NodeSpec: FieldSet{All: true}}}
	for _, v := range []any{&in.pod.ObjectMeta, &in.pod.Spec, &in.node.ObjectMeta, &in.node.Spec} {
		populate(reflect.ValueOf(v).Elem(), 0)
	}
	if in.trustDomain == "" {
		in.trustDomain = "example.org"
	}
	in.templateView()
	return in
}

// populate fills every settable field below v with a value: "x" for strings, 1 for numbers,
// one element for slices and maps, a populated value behind every pointer. It stops at a depth
// no pod field reaches, in case a type refers to itself.
func populate(v reflect.Value, depth int) {
	if depth > 12 || !v.CanSet() {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		populate(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		populate(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		populate(k, depth+1)
		populate(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			populate(v.Field(i), depth+1)
		}
	}
}
