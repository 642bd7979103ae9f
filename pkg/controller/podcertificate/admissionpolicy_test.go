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

package podcertificate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// shippedNodeOnlyPolicy reads the policy and binding of NodeOnlyPolicyManifest.
func shippedNodeOnlyPolicy(t *testing.T) (admissionregistrationv1.ValidatingAdmissionPolicy, admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", NodeOnlyPolicyManifest))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%s has %d documents, want the policy and its binding", NodeOnlyPolicyManifest, len(docs))
	}
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &p); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &b); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestNodeOnlyPolicy: the shipped policy and binding pass the start-up check for the default
// signer; anything that lets another creator through, or narrows or weakens them, fails it
// with an error that names the manifest and the opt-out.
func TestNodeOnlyPolicy(t *testing.T) {
	policy, binding := shippedNodeOnlyPolicy(t)
	for _, tc := range []struct {
		name                string
		signer              string // default testSignerName
		policy              func(*admissionregistrationv1.ValidatingAdmissionPolicy)
		binding             func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		noPolicy, noBinding bool
		wantErr             string // "": passes
	}{
		{name: "as shipped"},
		{name: "another signer name", signer: "example.com/svid", wantErr: `matchCondition signer is not "object.spec.signerName == 'example.com/svid'"`},
		{name: "another signer name, changed in the copy", signer: "example.com/svid", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConditions[0].Expression = "object.spec.signerName=='example.com/svid'"
		}},
		{name: "no policy", noPolicy: true, wantErr: "no ValidatingAdmissionPolicy"},
		{name: "not bound", noBinding: true, wantErr: "no binding of it has validationActions [Deny]"},
		{name: "bound to warn only", binding: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
		}, wantErr: "no binding of it has validationActions [Deny]"},
		{name: "bound in some namespaces", binding: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
		}, wantErr: "no binding of it has validationActions [Deny]"},
		{name: "bound to another policy", binding: func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { b.Spec.PolicyName = "other" },
			wantErr: "no binding of it"},
		{name: "failing open", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}, wantErr: "failurePolicy is Ignore"},
		{name: "another rule", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "request.userInfo.username.startsWith('system:node:')"
		}, wantErr: "no ValidatingAdmissionPolicy"},
		{name: "updates only", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
		}, wantErr: "do not cover the creation"},
		{name: "some objects only", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"checked": "yes"}}
		}, wantErr: "select namespaces or objects"},
		{name: "no match condition: every signer", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.MatchConditions = nil }},
		{name: "blanks differ", policy: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "request.userInfo.username=='system:node:'+object.spec.nodeName"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, b := *policy.DeepCopy(), *binding.DeepCopy()
			if tc.policy != nil {
				tc.policy(&p)
			}
			if tc.binding != nil {
				tc.binding(&b)
			}
			var policies []admissionregistrationv1.ValidatingAdmissionPolicy
			var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if !tc.noPolicy {
				policies = append(policies, p)
			}
			if !tc.noBinding {
				bindings = append(bindings, b)
			}
			signer := tc.signer
			if signer == "" {
				signer = testSignerName
			}
			err := nodeOnlyPolicyIn(policies, bindings, signer)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("nodeOnlyPolicyIn: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("nodeOnlyPolicyIn passed, want an error saying %q", tc.wantErr)
			}
			for _, want := range []string{tc.wantErr, NodeOnlyPolicyManifest, "podCertificates.trustNonNodeRequesters"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
