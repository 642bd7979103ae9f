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

package federation

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// declaration is what the ClusterFederatedTrustDomains naming one trust domain declare.
type declaration struct {
	// trustDomain is the key: the trust domain's name.
	trustDomain string
	// owner is the oldest resource naming the trust domain; the others are ignored.
	owner *spirev1alpha1.ClusterFederatedTrustDomain
	// relationship is the owner's spec as SPIRE should hold it. It is nil when the spec is
	// invalid: the trust domain is then declared but nothing can be written, so SPIRE's
	// relationship, if any, is left as it is rather than deleted.
	relationship *spiretypes.FederationRelationship
}

// declarations groups the resources of the handled class by the trust domain they name
// and resolves each group: the first by olderFirst wins, and the others are conflicts.
// Resources being deleted still declare until they are gone, as in spire-controller-manager.
// It returns the declarations by trust domain and the problems found, sorted by resource name.
func declarations(objs []*spirev1alpha1.ClusterFederatedTrustDomain, own spiffeid.TrustDomain, classMatches func(string) bool) (map[string]*declaration, []Problem) {
	groups := map[string][]*spirev1alpha1.ClusterFederatedTrustDomain{}
	for _, obj := range objs {
		if !classMatches(obj.Spec.ClassName) {
			continue
		}
		key := KeyOf(obj.Spec.TrustDomain)
		groups[key] = append(groups[key], obj)
	}

	decls := make(map[string]*declaration, len(groups))
	var problems []Problem
	for key, group := range groups {
		slices.SortFunc(group, olderFirst)
		d := &declaration{trustDomain: key, owner: group[0]}
		rel, errs := toRelationship(&d.owner.Spec, own)
		if len(errs) > 0 {
			problems = append(problems, Problem{Object: d.owner, Reason: spirev1alpha1.ReasonInvalidSpec,
				Message: "Invalid spec; the federation relationship is left as SPIRE holds it: " + errs.ToAggregate().Error()})
		}
		d.relationship = rel
		for _, loser := range group[1:] {
			problems = append(problems, Problem{Object: loser, Reason: spirev1alpha1.ReasonFederationConflict,
				Message: fmt.Sprintf("Trust domain %q is already declared by ClusterFederatedTrustDomain %q, which takes precedence (created first; in a tie, not being deleted, then the lower UID); this one is ignored", key, d.owner.Name)})
		}
		decls[key] = d
	}
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.Object.Name, b.Object.Name) })
	return decls, problems
}

// KeyOf is the key of the trust domain a resource names: the trust domain's name when it
// parses, so that "spiffe://td" and "td" share a key and an invalid spelling still guards the
// relationship it evidently means, and the raw string otherwise, so that the sync of that key
// finds the resource and reports it.
func KeyOf(trustDomain string) string {
	if td, err := spiffeid.TrustDomainFromString(trustDomain); err == nil {
		return td.Name()
	}
	return trustDomain
}

// olderFirst orders resources as spire-controller-manager breaks ties: by creation time,
// then resources not being deleted before those being deleted, then UID. Creation times have
// a resolution of one second, so the later keys decide real cases; all three are the same on
// every replica and after every restart.
func olderFirst(a, b *spirev1alpha1.ClusterFederatedTrustDomain) int {
	return cmp.Or(
		a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
		compareBool(a.DeletionTimestamp != nil, b.DeletionTimestamp != nil),
		strings.Compare(string(a.UID), string(b.UID)),
	)
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}
