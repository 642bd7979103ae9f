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

package podcert

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// AnnotationClusterSPIFFEID is the one spec.unverifiedUserAnnotations key this signer knows:
// the name of the ClusterSPIFFEID that must give the pod its identity, when the pod author
// wants that one rather than whichever applies.
const AnnotationClusterSPIFFEID = "spire.spiffe.io/clusterspiffeid"

// maxKeysNamed bounds how many unknown keys a message names.
const maxKeysNamed = 3

// CheckAnnotations returns the ClusterSPIFFEID that a request's
// spec.unverifiedUserAnnotations names ("" for none), or the decision to deny the request
// because they hold a key other than AnnotationClusterSPIFFEID, as Kubernetes asks signers
// to do for keys they do not recognise, or a value that cannot name a ClusterSPIFFEID.
func CheckAnnotations(annotations map[string]string) (string, *Decision) {
	var unknown []string
	for k := range annotations {
		if k != AnnotationClusterSPIFFEID {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		named := make([]string, 0, maxKeysNamed)
		for _, k := range unknown[:min(len(unknown), maxKeysNamed)] {
			named = append(named, quote(k))
		}
		more := ""
		if n := len(unknown) - len(named); n > 0 {
			more = fmt.Sprintf(" and %d more", n)
		}
		return "", Decide(ReasonInvalidUnverifiedUserAnnotations,
			"spec.unverifiedUserAnnotations has unsupported %s %s%s; the only key this signer supports is %q",
			plural(len(unknown), "key", "keys"), strings.Join(named, ", "), more, AnnotationClusterSPIFFEID)
	}
	name, ok := annotations[AnnotationClusterSPIFFEID]
	if !ok {
		return "", nil
	}
	// ClusterSPIFFEIDs are cluster-scoped objects: their names are DNS subdomains.
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", Decide(ReasonInvalidUnverifiedUserAnnotations,
			"spec.unverifiedUserAnnotations[%q] is %s, not the name of a ClusterSPIFFEID: %s",
			AnnotationClusterSPIFFEID, quote(name), strings.Join(errs, "; "))
	}
	return name, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
