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

// Package explain answers "why has my pod no identity?": for a pod, every ClusterSPIFFEID of
// the configured class with whether it selects the pod and why not, the entries they render
// (or why they cannot), which declarer wins when two render the same entry, and what SPIRE
// holds; for a ClusterSPIFFEID, its counts and its first failing pods.
//
// The explanations are pure functions of the objects, the config and SPIRE's entries, and use
// the entry controller's own code (pkg/render to select and render, pkg/reconciler to compare
// with SPIRE), so explain cannot disagree with the controller. Gathering the objects is
// separate (gather.go); printing them too (text.go).
package explain

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// Verdict reasons: why a ClusterSPIFFEID does or does not give a pod an entry. They are part
// of explain's stable JSON output.
const (
	// ReasonRendered: it selects the pod and renders its entry.
	ReasonRendered = "Rendered"
	// ReasonMasked: it renders an entry that a preferred (older) declarer renders too; that
	// declarer's is the one written.
	ReasonMasked = "Masked"
	// ReasonRenderFailed: it selects the pod but its templates render no valid entry.
	ReasonRenderFailed = "RenderFailed"
	// ReasonPodNotScheduled: it selects the pod, which has no node yet; the entry is rendered
	// once it is scheduled (the status counts it as a render failure meanwhile).
	ReasonPodNotScheduled = "PodNotScheduled"
	// ReasonNodeNotFound: it selects the pod, whose node does not exist.
	ReasonNodeNotFound = "NodeNotFound"
	// ReasonFallbackSuppressed: a fallback ClusterSPIFFEID that selects the pod, skipped
	// because a regular one renders an entry for it.
	ReasonFallbackSuppressed = "FallbackSuppressed"
	// ReasonClassMismatch: its className is not the controller's (className, watchClassless).
	ReasonClassMismatch = "ClassMismatch"
	// ReasonNotWatched: it lacks the labels of clusterSPIFFEIDLabelSelector or
	// filterByClassName, so the controller never sees it.
	ReasonNotWatched = "NotWatched"
	// ReasonInvalidSelector: its namespaceSelector or podSelector is invalid; it selects
	// nothing.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonNamespaceSelectorMismatch: its namespaceSelector does not match the pod's
	// namespace.
	ReasonNamespaceSelectorMismatch = "NamespaceSelectorMismatch"
	// ReasonPodSelectorMismatch: its podSelector does not match the pod's labels.
	ReasonPodSelectorMismatch = "PodSelectorMismatch"
	// ReasonNamespaceIgnored: it selects the pod, but the pod's namespace is ignored by the
	// config (ignoreNamespaces, or outside cacheNamespaces).
	ReasonNamespaceIgnored = "NamespaceIgnored"
	// ReasonPodNotWatched: it selects the pod, but cacheNamespaces' selectors keep the pod
	// out of the controller's view.
	ReasonPodNotWatched = "PodNotWatched"
	// ReasonPodFinished: it selects the pod, which has finished (Succeeded or Failed):
	// finished pods declare no entries.
	ReasonPodFinished = "PodFinished"
	// ReasonClusterSPIFFEIDsNotReconciled: the config turns ClusterSPIFFEIDs off
	// (reconcile.clusterSPIFFEIDs: false).
	ReasonClusterSPIFFEIDsNotReconciled = "ClusterSPIFFEIDsNotReconciled"
)

// SPIRE states of a rendered entry.
const (
	// StateInSync: SPIRE holds the entry as rendered.
	StateInSync = "InSync"
	// StateOutdated: SPIRE holds an entry of the same SPIFFE ID, parent ID and selectors, but
	// some fields differ; the controller updates them at its next sync of the pod.
	StateOutdated = "Outdated"
	// StateMissing: SPIRE holds no such entry.
	StateMissing = "Missing"
	// StateMasked: not written, a preferred declarer's identical entry is.
	StateMasked = "Masked"
)

// Pod explains what a pod declares and what SPIRE holds for it.
type Pod struct {
	// Pod is "namespace/name".
	Pod   string `json:"pod"`
	UID   string `json:"uid"`
	Node  string `json:"node,omitempty"`
	Phase string `json:"phase,omitempty"`
	// Config is what of the controller's config decided the answer.
	Config ConfigSummary `json:"config"`
	// Eligible is false when the pod declares no entry whatever selects it; Reason and
	// Message then say why (one of NamespaceIgnored, PodNotWatched, PodFinished,
	// ClusterSPIFFEIDsNotReconciled).
	Eligible bool   `json:"eligible"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	// Notes are facts that do not stop entries but explain them (the pod or a
	// ClusterSPIFFEID being deleted).
	Notes []string `json:"notes,omitempty"`
	// ClusterSPIFFEIDs are all ClusterSPIFFEIDs in the cluster, most preferred first: those of
	// the controller's class in the order it renders them, then the others.
	ClusterSPIFFEIDs []Verdict `json:"clusterSPIFFEIDs"`
	// Entries are the rendered entries, masked ones included, each with its SPIRE state.
	Entries []RenderedEntry `json:"entries"`
	// StaleSPIREEntries are entries SPIRE holds for the pod that nothing declares: the
	// controller deletes them, or rewrites one into a missing entry, at its next sync.
	StaleSPIREEntries []Entry `json:"staleSPIREEntries,omitempty"`
	// ForeignSPIREEntries are entries SPIRE holds for the pod that the controller does not
	// own (another entryIDPrefix): it never reads, updates or deletes them.
	ForeignSPIREEntries []Entry `json:"foreignSPIREEntries,omitempty"`
	// Summary is a one-line answer.
	Summary string `json:"summary"`
}

// ConfigSummary is the part of the config an explanation depends on.
type ConfigSummary struct {
	TrustDomain      string   `json:"trustDomain"`
	ClusterName      string   `json:"clusterName"`
	ClusterDomain    string   `json:"clusterDomain,omitempty"`
	ClassName        string   `json:"className"`
	WatchClassless   bool     `json:"watchClassless"`
	IgnoreNamespaces []string `json:"ignoreNamespaces"`
	EntryIDPrefix    string   `json:"entryIDPrefix,omitempty"`
	ParentIDTemplate string   `json:"parentIDTemplate"`
}

// Verdict is whether one ClusterSPIFFEID gives the pod an entry, and why.
type Verdict struct {
	Name      string `json:"name"`
	ClassName string `json:"className,omitempty"`
	Fallback  bool   `json:"fallback,omitempty"`
	// Selects is true when the controller renders this ClusterSPIFFEID for the pod (Reason
	// Rendered, Masked, RenderFailed, PodNotScheduled or NodeNotFound).
	Selects bool   `json:"selects"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// RenderedEntry is an entry a ClusterSPIFFEID renders for the pod, with what SPIRE holds.
type RenderedEntry struct {
	// ClusterSPIFFEID names the declarer.
	ClusterSPIFFEID string `json:"clusterSPIFFEID"`
	Entry           Entry  `json:"entry"`
	// State is one of InSync, Outdated, Missing, Masked.
	State string `json:"state"`
	// MaskedBy names the preferred declarer of the same entry when State is Masked.
	MaskedBy string `json:"maskedBy,omitempty"`
	// SPIREEntryID is the ID of SPIRE's entry of the same key (InSync, Outdated).
	SPIREEntryID string `json:"spireEntryID,omitempty"`
	// Diff lists the outdated fields (Outdated).
	Diff []FieldDiff `json:"diff,omitempty"`
}

// FieldDiff is one field in which SPIRE's entry differs from the rendered one.
type FieldDiff struct {
	// Field is the field's JSON name in SPIRE's API (x509SvidTtl, dnsNames, ...).
	Field    string `json:"field"`
	SPIRE    string `json:"spire"`
	Rendered string `json:"rendered"`
}

// Entry is a registration entry in a form people read: IDs as URIs, selectors as
// "type:value". It shows every field of reconciler.ManagedEntryFields (TestEntryShowsEveryManagedField);
// its JSON names are kept stable.
type Entry struct {
	ID            string   `json:"id,omitempty"`
	SPIFFEID      string   `json:"spiffeID"`
	ParentID      string   `json:"parentID"`
	Selectors     []string `json:"selectors"`
	X509SVIDTTL   int32    `json:"x509SvidTtl,omitempty"`
	JWTSVIDTTL    int32    `json:"jwtSvidTtl,omitempty"`
	FederatesWith []string `json:"federatesWith,omitempty"`
	DNSNames      []string `json:"dnsNames,omitempty"`
	Admin         bool     `json:"admin,omitempty"`
	Downstream    bool     `json:"downstream,omitempty"`
	Hint          string   `json:"hint,omitempty"`
	StoreSVID     bool     `json:"storeSvid,omitempty"`
}

// ClusterSPIFFEID explains what a ClusterSPIFFEID does across the pods it selects.
type ClusterSPIFFEID struct {
	Name      string `json:"name"`
	ClassName string `json:"className,omitempty"`
	Fallback  bool   `json:"fallback,omitempty"`
	// Handled is false when the controller ignores it; Reason (ClassMismatch, NotWatched,
	// ClusterSPIFFEIDsNotReconciled) and Message say why.
	Handled bool   `json:"handled"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// SpecError is why its spec cannot render any entry.
	SpecError string `json:"specError,omitempty"`
	// Status is the stats the controller last wrote in status.stats, and Ready its Ready
	// condition.
	Status spirev1alpha1.ClusterSPIFFEIDStats `json:"status"`
	Ready  *metav1.Condition                  `json:"ready,omitempty"`
	// Observed counts what explain finds now, by the same rules.
	Observed Counts `json:"observed"`
	// Failures are the first failing pods, by namespace and name; MoreFailures counts those
	// left out.
	Failures     []PodFailure `json:"failures"`
	MoreFailures int          `json:"moreFailures,omitempty"`
}

// Counts are what a ClusterSPIFFEID does across the pods it selects. The first four count as
// status.stats does.
type Counts struct {
	NamespacesSelected int `json:"namespacesSelected"`
	NamespacesIgnored  int `json:"namespacesIgnored"`
	// PodsSelected are the pods its selectors match in namespaces not ignored.
	PodsSelected int `json:"podsSelected"`
	// Rendered pods get an entry from it; InSync, Outdated and Missing split them by what
	// SPIRE holds. Masked pods' entries come from a preferred declarer.
	Rendered int `json:"rendered"`
	InSync   int `json:"inSync"`
	Outdated int `json:"outdated"`
	Missing  int `json:"missing"`
	Masked   int `json:"masked"`
	// RenderFailed pods are selected but render no entry (NotScheduled ones included, as in
	// status.stats.podEntryRenderFailures); NotScheduled pods wait for a node.
	RenderFailed int `json:"renderFailed"`
	NotScheduled int `json:"notScheduled"`
	// FallbackSuppressed and Finished pods are selected but get no entry from it by design.
	FallbackSuppressed int `json:"fallbackSuppressed"`
	Finished           int `json:"finished"`
}

// PodFailure is a pod for which a ClusterSPIFFEID's entry is not in SPIRE as rendered.
type PodFailure struct {
	Pod string `json:"pod"`
	// Reason is a verdict reason (RenderFailed, PodNotScheduled, NodeNotFound) or a SPIRE
	// state (Missing, Outdated).
	Reason  string `json:"reason"`
	Message string `json:"message"`
}
