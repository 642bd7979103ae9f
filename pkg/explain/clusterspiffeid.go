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

package explain

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// ClusterSPIFFEIDInput is everything explaining a ClusterSPIFFEID takes.
type ClusterSPIFFEIDInput struct {
	ClusterSPIFFEID *spirev1alpha1.ClusterSPIFFEID
	// Namespaces are all the cluster's namespaces.
	Namespaces []*corev1.Namespace
	// ClusterSPIFFEIDs are all the cluster's ClusterSPIFFEIDs, this one among them; they are
	// compiled once for all pods, whose own ClusterSPIFFEIDs are not used.
	ClusterSPIFFEIDs []*spirev1alpha1.ClusterSPIFFEID
	// Pods are the pods its selectors match in namespaces not ignored, each with what a pod's
	// explanation takes.
	Pods []PodInput
}

// DefaultFailureLimit is how many failing pods a ClusterSPIFFEID's explanation lists.
const DefaultFailureLimit = 10

// ClusterSPIFFEID explains a ClusterSPIFFEID: the stats the controller wrote, the same counts
// found now by explaining each selected pod, and the first limit pods for which its entry is
// not in SPIRE as rendered, by namespace and name.
func (x *Explainer) ClusterSPIFFEID(in ClusterSPIFFEIDInput, limit int) *ClusterSPIFFEID {
	c := in.ClusterSPIFFEID
	out := &ClusterSPIFFEID{
		Name: c.Name, ClassName: c.Spec.ClassName, Fallback: c.Spec.Fallback, Handled: true,
		Status: c.Status.Stats, Ready: meta.FindStatusCondition(c.Status.Conditions, spirev1alpha1.ConditionReady),
		Failures: []PodFailure{},
	}
	if reason, message := x.unhandled(c); reason != "" {
		out.Handled, out.Reason, out.Message = false, reason, message
		return out
	}
	compiled := render.CompileClusterSPIFFEID(c)
	if compiled.Err != nil {
		out.SpecError = compiled.Err.Error()
	}
	for _, ns := range in.Namespaces {
		if !compiled.NamespaceSelector.Matches(labels.Set(ns.Labels)) {
			continue
		}
		out.Observed.NamespacesSelected++
		if x.cfg.IsNamespaceIgnored(ns.Name) {
			out.Observed.NamespacesIgnored++
		}
	}

	handled, unhandled := x.partition(in.ClusterSPIFFEIDs)
	pods := slices.Clone(in.Pods)
	slices.SortFunc(pods, func(a, b PodInput) int {
		return cmp.Or(cmp.Compare(a.Pod.Namespace, b.Pod.Namespace), cmp.Compare(a.Pod.Name, b.Pod.Name))
	})
	for _, p := range pods {
		if x.cfg.IsNamespaceIgnored(p.Pod.Namespace) || !compiled.Selects(p.Namespace, p.Pod) {
			continue
		}
		out.Observed.PodsSelected++
		explained := x.pod(p, handled, unhandled)
		if failure := count(&out.Observed, c.Name, explained); failure != nil {
			if len(out.Failures) < limit {
				out.Failures = append(out.Failures, *failure)
			} else {
				out.MoreFailures++
			}
		}
	}
	return out
}

// count adds one selected pod's outcome for the ClusterSPIFFEID name to counts, and returns
// the failure it is, if any.
func count(counts *Counts, name string, p *Pod) *PodFailure {
	var v Verdict
	for _, candidate := range p.ClusterSPIFFEIDs {
		if candidate.Name == name {
			v = candidate
		}
	}
	failure := &PodFailure{Pod: p.Pod, Reason: v.Reason, Message: v.Message}
	switch v.Reason {
	case ReasonRendered:
		counts.Rendered++
		for _, e := range p.Entries {
			if e.ClusterSPIFFEID != name {
				continue
			}
			switch e.State {
			case StateInSync:
				counts.InSync++
				return nil
			case StateOutdated:
				counts.Outdated++
				failure.Reason, failure.Message = StateOutdated, fmt.Sprintf("SPIRE entry %s differs in %s", e.SPIREEntryID, diffFields(e.Diff))
			case StateMissing:
				counts.Missing++
				failure.Reason, failure.Message = StateMissing, "SPIRE holds no entry "+e.Entry.SPIFFEID+" for the pod"
			}
		}
		return failure
	case ReasonMasked:
		counts.Masked++
		return nil
	case ReasonRenderFailed, ReasonNodeNotFound:
		counts.RenderFailed++
		return failure
	case ReasonPodNotScheduled:
		counts.RenderFailed++
		counts.NotScheduled++
		return failure
	case ReasonFallbackSuppressed:
		counts.FallbackSuppressed++
	case ReasonPodFinished:
		counts.Finished++
	}
	return nil
}

func diffFields(diff []FieldDiff) string {
	var names []string
	for _, d := range diff {
		names = append(names, d.Field)
	}
	return fmt.Sprint(names)
}
