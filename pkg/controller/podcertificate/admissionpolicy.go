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
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
)

// NodeOnlyPolicyManifest is the manifest of the ValidatingAdmissionPolicy and binding that
// let only a pod's node create PodCertificateRequests for the default signer name.
const NodeOnlyPolicyManifest = "manifests/pod-certificates/admission_policy.yaml"

// The rule a node-only policy enforces, in CEL, compared with blanks removed.
const (
	// nodeOnlyValidation admits only the node the request names.
	nodeOnlyValidation = "request.userInfo.username == 'system:node:' + object.spec.nodeName"
	// signerConditionFormat narrows the policy to one signer name.
	signerConditionFormat = "object.spec.signerName == '%s'"
)

// CheckNodeOnlyPolicy returns nil when kube-apiserver admits a PodCertificateRequest for
// signerName only from the node it names: a ValidatingAdmissionPolicy that states that rule
// for every such request, bound with validationActions Deny and narrowed by nothing. Without
// one, anyone allowed to create requests could name any pod of a namespace and be issued its
// identity; the error says what to apply.
func CheckNodeOnlyPolicy(ctx context.Context, client clientset.Interface, signerName string) error {
	admission := client.AdmissionregistrationV1()
	policies, err := admission.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("reading ValidatingAdmissionPolicies, to check that only nodes may request pod certificates "+
			"(grant list on validatingadmissionpolicies and validatingadmissionpolicybindings, as manifests/pod-certificates/cluster_role.yaml does): %w", err)
	}
	bindings, err := admission.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("reading ValidatingAdmissionPolicyBindings, to check that only nodes may request pod certificates "+
			"(grant list on validatingadmissionpolicies and validatingadmissionpolicybindings, as manifests/pod-certificates/cluster_role.yaml does): %w", err)
	}
	return nodeOnlyPolicyIn(policies.Items, bindings.Items, signerName)
}

// nodeOnlyPolicyIn returns nil when one of policies, bound by one of bindings, enforces that
// only the named node creates PodCertificateRequests for signerName; else why not.
func nodeOnlyPolicyIn(policies []admissionregistrationv1.ValidatingAdmissionPolicy, bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding, signerName string) error {
	var why []string
	for i := range policies {
		p := &policies[i]
		problem := nodeOnlyPolicyProblem(p, signerName)
		if problem == "" {
			bound := slices.ContainsFunc(bindings, func(b admissionregistrationv1.ValidatingAdmissionPolicyBinding) bool {
				return b.Spec.PolicyName == p.Name && enforcesEverywhere(&b)
			})
			if bound {
				return nil
			}
			problem = "no binding of it has validationActions [Deny] with no paramRef and no matchResources"
		}
		if problem != "-" {
			why = append(why, fmt.Sprintf("ValidatingAdmissionPolicy %s: %s", p.Name, problem))
		}
	}
	msg := fmt.Sprintf("podCertificates.enabled: no ValidatingAdmissionPolicy, bound with validationActions [Deny], lets only a pod's node create "+
		"PodCertificateRequests for signer %s, so anyone allowed to create them could be issued any pod's identity. Apply %s "+
		"(for another signer name, a copy with that name in its matchConditions), or set podCertificates.trustNonNodeRequesters: true "+
		"if every user who may create them is trusted", signerName, NodeOnlyPolicyManifest)
	if len(why) > 0 {
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	return fmt.Errorf("%s", msg)
}

// nodeOnlyPolicyProblem returns "" when p rejects, with failurePolicy Fail, the creation of
// every PodCertificateRequest for signerName whose creator is not the node it names; "-"
// when p has nothing to do with such requests; else what is wrong with it.
func nodeOnlyPolicyProblem(p *admissionregistrationv1.ValidatingAdmissionPolicy, signerName string) string {
	spec := &p.Spec
	validates := slices.ContainsFunc(spec.Validations, func(v admissionregistrationv1.Validation) bool {
		return sameCEL(v.Expression, nodeOnlyValidation)
	})
	if !validates {
		return "-"
	}
	for _, c := range spec.MatchConditions {
		if !sameCEL(c.Expression, fmt.Sprintf(signerConditionFormat, signerName)) {
			return fmt.Sprintf("matchCondition %s is not %q", c.Name, fmt.Sprintf(signerConditionFormat, signerName))
		}
	}
	switch {
	case spec.FailurePolicy != nil && *spec.FailurePolicy != admissionregistrationv1.Fail:
		return fmt.Sprintf("failurePolicy is %s, not Fail", *spec.FailurePolicy)
	case spec.ParamKind != nil:
		return "it has a paramKind"
	case spec.MatchConstraints == nil:
		return "it has no matchConstraints"
	case !matchesEverything(spec.MatchConstraints.NamespaceSelector) || !matchesEverything(spec.MatchConstraints.ObjectSelector):
		return "its matchConstraints select namespaces or objects"
	case slices.ContainsFunc(spec.MatchConstraints.ExcludeResourceRules, coversRequestCreation):
		return "its matchConstraints exclude PodCertificateRequests"
	case !slices.ContainsFunc(spec.MatchConstraints.ResourceRules, coversRequestCreation):
		return "its matchConstraints do not cover the creation of certificates.k8s.io/v1 podcertificaterequests"
	}
	return ""
}

// enforcesEverywhere reports whether a binding denies what its policy rejects, in every
// namespace.
func enforcesEverywhere(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) bool {
	if !slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) || b.Spec.ParamRef != nil {
		return false
	}
	m := b.Spec.MatchResources
	return m == nil || (matchesEverything(m.NamespaceSelector) && matchesEverything(m.ObjectSelector) &&
		len(m.ResourceRules) == 0 && len(m.ExcludeResourceRules) == 0)
}

// coversRequestCreation reports whether a rule covers the creation of PodCertificateRequests
// of certificates.k8s.io/v1.
func coversRequestCreation(r admissionregistrationv1.NamedRuleWithOperations) bool {
	has := func(list []string, want string) bool {
		return slices.Contains(list, want) || slices.Contains(list, "*")
	}
	ops := make([]string, len(r.Operations))
	for i, op := range r.Operations {
		ops[i] = string(op)
	}
	return len(r.ResourceNames) == 0 && has(ops, string(admissionregistrationv1.Create)) &&
		has(r.APIGroups, certificatesv1.GroupName) && has(r.APIVersions, "v1") && has(r.Resources, "podcertificaterequests") &&
		(r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes || *r.Scope == admissionregistrationv1.NamespacedScope)
}

// matchesEverything reports whether a selector selects everything: nil, or empty.
func matchesEverything(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

// sameCEL reports whether two CEL expressions are the same but for blanks.
func sameCEL(a, b string) bool {
	return strings.Join(strings.Fields(a), "") == strings.Join(strings.Fields(b), "")
}
