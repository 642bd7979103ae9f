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
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// PodInput is everything explaining a pod takes.
type PodInput struct {
	Pod       *corev1.Pod
	Namespace *corev1.Namespace
	// Node is the pod's node; nil when it is not scheduled or its node does not exist.
	Node *corev1.Node
	// EndpointSlices are the slices of the pod's namespace (those that do not list the pod
	// are ignored), for autoPopulateDNSNames.
	EndpointSlices []*discoveryv1.EndpointSlice
	// ClusterSPIFFEIDs are all the cluster's ClusterSPIFFEIDs, whatever their class.
	ClusterSPIFFEIDs []*spirev1alpha1.ClusterSPIFFEID
	// SPIREEntries are SPIRE's entries carrying the pod's UID selector; others are ignored.
	SPIREEntries []*spiretypes.Entry
}

// Explainer explains with the controller's config.
type Explainer struct {
	cfg      *config.Config
	renderer *render.Renderer
}

// New returns an Explainer for the config the controller runs with.
func New(cfg *config.Config) (*Explainer, error) {
	r, err := render.NewRenderer(render.Settings{TrustDomain: cfg.TrustDomain, ClusterName: cfg.ClusterName, ClusterDomain: cfg.ClusterDomain, ParentIDTemplate: cfg.ParentIDTemplate})
	if err != nil {
		return nil, err
	}
	return &Explainer{cfg: cfg, renderer: r}, nil
}

// Pod explains a pod: which ClusterSPIFFEIDs give it entries and why the others do not, what
// they render, and what SPIRE holds. It takes the controller's path (see the entry
// controller's declarePod): the same eligibility checks, then render.Renderer.PodEntries on
// the ClusterSPIFFEIDs of the class, most preferred first.
func (x *Explainer) Pod(in PodInput) *Pod {
	handled, unhandled := x.partition(in.ClusterSPIFFEIDs)
	return x.pod(in, handled, unhandled)
}

// pod explains a pod with the ClusterSPIFFEIDs compiled once by partition.
func (x *Explainer) pod(in PodInput, handled []*render.ClusterSPIFFEID, unhandled []Verdict) *Pod {
	pod := in.Pod
	out := &Pod{
		Pod: pod.Namespace + "/" + pod.Name, UID: string(pod.UID), Node: pod.Spec.NodeName, Phase: string(pod.Status.Phase),
		Config: x.configSummary(), Eligible: true, Entries: []RenderedEntry{},
	}
	if pod.DeletionTimestamp != nil {
		out.Notes = append(out.Notes, "The pod is being deleted; its entries stay until it is gone.")
	}
	if reason, message := x.podIneligible(pod); reason != "" {
		out.Eligible, out.Reason, out.Message = false, reason, message
	}

	var declared []*render.DeclaredEntry
	var failures []render.Failure
	if out.Eligible {
		declared, failures = x.renderer.PodEntries(handled, pod, in.Namespace, in.Node, in.EndpointSlices)
	}
	owned, foreign := x.splitOwned(pod, in.SPIREEntries)
	out.ForeignSPIREEntries = foreign
	plan := reconciler.Diff(declared, owned)
	maskedBy := maskedBy(plan)
	handledVerdicts := []Verdict{}
	for _, c := range handled {
		v := x.verdict(c, in, out, declared, failures, maskedBy)
		if v.Selects && !c.Deleted.IsZero() {
			out.Notes = append(out.Notes, fmt.Sprintf("ClusterSPIFFEID %s is being deleted; it declares entries until it is gone.", c.Name))
		}
		handledVerdicts = append(handledVerdicts, v)
	}
	out.ClusterSPIFFEIDs = append(handledVerdicts, unhandled...)

	out.Entries, out.StaleSPIREEntries = compareWithSPIRE(declared, owned, plan, maskedBy)
	out.Summary = summarizePod(out)
	return out
}

// podIneligible says why a pod declares no entry whatever selects it, in the controller's
// order, or "" when it may declare entries.
func (x *Explainer) podIneligible(pod *corev1.Pod) (string, string) {
	switch {
	case !x.cfg.Reconcile.ClusterSPIFFEIDs:
		return ReasonClusterSPIFFEIDsNotReconciled, "the config sets reconcile.clusterSPIFFEIDs to false: no ClusterSPIFFEID declares entries"
	case x.cfg.IsNamespaceIgnored(pod.Namespace):
		return ReasonNamespaceIgnored, x.ignoredMessage(pod.Namespace)
	case !x.watchesPod(pod):
		c := x.cfg.CacheNamespaces[pod.Namespace]
		return ReasonPodNotWatched, fmt.Sprintf("cacheNamespaces[%s] watches only pods matching labelSelector %q fieldSelector %q",
			pod.Namespace, c.LabelSelector, c.FieldSelector)
	case !render.PodDeclaresEntries(pod):
		return ReasonPodFinished, fmt.Sprintf("the pod has finished (phase %s): finished pods declare no entries", pod.Status.Phase)
	}
	return "", ""
}

// ignoredMessage names the config field that ignores a namespace.
func (x *Explainer) ignoredMessage(namespace string) string {
	if len(x.cfg.CacheNamespaces) > 0 {
		if _, ok := x.cfg.CacheNamespaces[namespace]; !ok {
			return fmt.Sprintf("namespace %s is not in cacheNamespaces", namespace)
		}
	}
	for _, pattern := range x.cfg.IgnoreNamespaces {
		if re, err := regexp.Compile(pattern); err == nil && re.MatchString(namespace) {
			return fmt.Sprintf("namespace %s matches ignoreNamespaces pattern %q", namespace, pattern)
		}
	}
	return fmt.Sprintf("namespace %s is ignored by the config", namespace)
}

// watchesPod reports whether cacheNamespaces' selectors let the controller see a pod.
func (x *Explainer) watchesPod(pod *corev1.Pod) bool {
	c, ok := x.cfg.CacheNamespaces[pod.Namespace]
	if !ok {
		return true
	}
	if ls, err := labels.Parse(c.LabelSelector); err == nil && !ls.Matches(labels.Set(pod.Labels)) {
		return false
	}
	if fs, err := fields.ParseSelector(c.FieldSelector); err == nil && !fs.Matches(podFields(pod)) {
		return false
	}
	return true
}

// podFields are the fields the API server selects pods by.
func podFields(pod *corev1.Pod) fields.Set {
	return fields.Set{
		"metadata.name": pod.Name, "metadata.namespace": pod.Namespace,
		"spec.nodeName": pod.Spec.NodeName, "spec.restartPolicy": string(pod.Spec.RestartPolicy),
		"spec.schedulerName": pod.Spec.SchedulerName, "spec.serviceAccountName": pod.Spec.ServiceAccountName,
		"spec.hostNetwork": fmt.Sprint(pod.Spec.HostNetwork), "status.phase": string(pod.Status.Phase),
		"status.podIP": pod.Status.PodIP, "status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

// partition compiles the ClusterSPIFFEIDs the controller handles, most preferred first, and
// returns the verdicts of the others, by name.
func (x *Explainer) partition(all []*spirev1alpha1.ClusterSPIFFEID) ([]*render.ClusterSPIFFEID, []Verdict) {
	var handled []*render.ClusterSPIFFEID
	var others []Verdict
	for _, c := range all {
		if reason, message := x.unhandled(c); reason != "" {
			others = append(others, Verdict{Name: c.Name, ClassName: c.Spec.ClassName, Fallback: c.Spec.Fallback, Reason: reason, Message: message})
			continue
		}
		handled = append(handled, render.CompileClusterSPIFFEID(c))
	}
	render.SortByPreference(handled)
	slices.SortFunc(others, func(a, b Verdict) int { return cmp.Compare(a.Name, b.Name) })
	return handled, others
}

// unhandled says why the controller ignores a ClusterSPIFFEID, or "" when it handles it.
func (x *Explainer) unhandled(c *spirev1alpha1.ClusterSPIFFEID) (string, string) {
	switch {
	case !x.cfg.Reconcile.ClusterSPIFFEIDs:
		return ReasonClusterSPIFFEIDsNotReconciled, "the config sets reconcile.clusterSPIFFEIDs to false"
	case !x.cfg.Class().Matches(c.Spec.ClassName):
		return ReasonClassMismatch, classMessage(c.Spec.ClassName, x.cfg)
	case len(x.cfg.ClusterSPIFFEIDLabels) > 0 && !labels.SelectorFromSet(x.cfg.ClusterSPIFFEIDLabels).Matches(labels.Set(c.Labels)):
		return ReasonNotWatched, fmt.Sprintf("it lacks the labels %s (clusterSPIFFEIDLabelSelector, filterByClassName)",
			labels.SelectorFromSet(x.cfg.ClusterSPIFFEIDLabels))
	}
	return "", ""
}

func classMessage(className string, cfg *config.Config) string {
	switch {
	case className == "":
		return fmt.Sprintf("it has no className and watchClassless is false (the controller's className is %q)", cfg.ClassName)
	case cfg.ClassName == "":
		return fmt.Sprintf("its className is %q; the controller has no className", className)
	}
	return fmt.Sprintf("its className is %q, the controller's is %q", className, cfg.ClassName)
}

// verdict decides one handled ClusterSPIFFEID's verdict for the pod.
func (x *Explainer) verdict(c *render.ClusterSPIFFEID, in PodInput, pod *Pod, declared []*render.DeclaredEntry,
	failures []render.Failure, maskedBy map[*render.DeclaredEntry]*render.DeclaredEntry) Verdict {
	v := Verdict{Name: c.Name, ClassName: c.Spec.ClassName, Fallback: c.Spec.Fallback}
	if reason, message := selectorMismatch(c, in.Namespace, in.Pod); reason != "" {
		v.Reason, v.Message = reason, message
		return v
	}
	if !pod.Eligible {
		v.Reason, v.Message = pod.Reason, "its selectors match, but "+pod.Message
		return v
	}
	for _, d := range declared {
		if d.Declarer.Name != c.Name {
			continue
		}
		v.Selects, v.Reason = true, ReasonRendered
		if w := maskedBy[d]; w != nil {
			v.Reason = ReasonMasked
			v.Message = fmt.Sprintf("%s %s declares the same entry and is preferred (older); its entry is written", w.Declarer.Kind, w.Declarer.Name)
		}
		return v
	}
	for _, f := range failures {
		if f.ClusterSPIFFEID.Name != c.Name {
			continue
		}
		v.Selects, v.Reason, v.Message = true, ReasonRenderFailed, f.Err.Error()
		if errors.Is(f.Err, render.ErrNodeNotFound) {
			v.Reason, v.Message = ReasonNodeNotFound, fmt.Sprintf("node %s does not exist", in.Pod.Spec.NodeName)
			if in.Pod.Spec.NodeName == "" {
				v.Reason, v.Message = ReasonPodNotScheduled, "the pod has no node yet; its entry is rendered once it is scheduled"
			}
		}
		return v
	}
	// It selects the pod, is a fallback, and rendered nothing: a regular one did.
	var regular []string
	for _, d := range declared {
		regular = append(regular, d.Declarer.Name)
	}
	v.Reason = ReasonFallbackSuppressed
	v.Message = fmt.Sprintf("a fallback, and regular ClusterSPIFFEIDs render entries for the pod (%s)", strings.Join(slices.Compact(regular), ", "))
	return v
}

// selectorMismatch says why a ClusterSPIFFEID's selectors do not match a pod, or "".
func selectorMismatch(c *render.ClusterSPIFFEID, ns *corev1.Namespace, pod *corev1.Pod) (string, string) {
	if _, err := metav1.LabelSelectorAsSelector(c.Spec.NamespaceSelector); err != nil {
		return ReasonInvalidSelector, "namespaceSelector: " + err.Error()
	}
	if _, err := metav1.LabelSelectorAsSelector(c.Spec.PodSelector); err != nil {
		return ReasonInvalidSelector, "podSelector: " + err.Error()
	}
	if !c.NamespaceSelector.Matches(labels.Set(ns.Labels)) {
		return ReasonNamespaceSelectorMismatch, fmt.Sprintf("namespaceSelector %q does not match namespace %s labels %s",
			c.NamespaceSelector, ns.Name, labelString(ns.Labels))
	}
	if !c.PodSelector.Matches(labels.Set(pod.Labels)) {
		return ReasonPodSelectorMismatch, fmt.Sprintf("podSelector %q does not match pod labels %s", c.PodSelector, labelString(pod.Labels))
	}
	return "", ""
}

func labelString(l map[string]string) string {
	if len(l) == 0 {
		return "{}"
	}
	return "{" + labels.Set(l).String() + "}"
}

// maskedBy maps each masked entry of a plan to the entry of its key that is written.
func maskedBy(p reconciler.Plan) map[*render.DeclaredEntry]*render.DeclaredEntry {
	winners := map[render.Key]*render.DeclaredEntry{}
	for _, d := range p.ToCreate {
		winners[d.Key] = d
	}
	for _, u := range p.ToUpdate {
		winners[u.Desired.Key] = u.Desired
	}
	for _, d := range p.InSync {
		winners[d.Key] = d
	}
	out := map[*render.DeclaredEntry]*render.DeclaredEntry{}
	for _, d := range p.Masked {
		out[d] = winners[d.Key]
	}
	return out
}

// splitOwned separates the pod's entries the controller owns from the others.
func (x *Explainer) splitOwned(pod *corev1.Pod, entries []*spiretypes.Entry) ([]*spiretypes.Entry, []Entry) {
	opts := reconciler.Options{
		EntryIDPrefix: x.cfg.EntryIDPrefix, EntryIDPrefixCleanup: x.cfg.EntryIDPrefixCleanup,
		SkipClusterSPIFFEIDs: !x.cfg.Reconcile.ClusterSPIFFEIDs, SkipClusterStaticEntries: !x.cfg.Reconcile.ClusterStaticEntries,
	}
	var owned []*spiretypes.Entry
	var foreign []Entry
	for _, e := range entries {
		switch {
		case render.PodUIDOf(e) != pod.UID:
		case reconciler.Owns(opts, e):
			owned = append(owned, e)
		default:
			foreign = append(foreign, entryOf(e))
		}
	}
	return owned, foreign
}

// compareWithSPIRE reads the state of each declared entry from the plan a sync of the pod
// would make, and returns the rendered entries with their state and the owned entries it
// would delete or rewrite into another identity.
func compareWithSPIRE(declared []*render.DeclaredEntry, owned []*spiretypes.Entry, plan reconciler.Plan,
	maskedBy map[*render.DeclaredEntry]*render.DeclaredEntry) ([]RenderedEntry, []Entry) {
	states := map[*render.DeclaredEntry]RenderedEntry{}
	var stale []Entry
	gone := map[*spiretypes.Entry]bool{}
	for _, e := range plan.ToDelete {
		gone[e] = true
		stale = append(stale, entryOf(e))
	}
	for _, d := range plan.ToCreate {
		states[d] = RenderedEntry{State: StateMissing}
	}
	for _, u := range plan.ToUpdate {
		if u.Replaces {
			// The entry of another identity the sync rewrites: the declared one is missing.
			gone[u.Current] = true
			stale = append(stale, entryOf(u.Current))
			states[u.Desired] = RenderedEntry{State: StateMissing}
			continue
		}
		r := RenderedEntry{State: StateOutdated, SPIREEntryID: u.Current.GetId()}
		for _, c := range u.Changes() {
			r.Diff = append(r.Diff, FieldDiff{Field: c.Field, SPIRE: c.Current, Rendered: c.Desired})
		}
		states[u.Desired] = r
	}
	kept := map[render.Key]*spiretypes.Entry{}
	for _, e := range owned {
		if !gone[e] {
			kept[render.KeyOf(e)] = e
		}
	}
	for _, d := range plan.InSync {
		states[d] = RenderedEntry{State: StateInSync, SPIREEntryID: kept[d.Key].GetId()}
	}
	for d, w := range maskedBy {
		states[d] = RenderedEntry{State: StateMasked, MaskedBy: w.Declarer.Name}
	}
	out := []RenderedEntry{}
	for _, d := range declared {
		r := states[d]
		r.ClusterSPIFFEID, r.Entry = d.Declarer.Name, entryOf(d.Entry)
		out = append(out, r)
	}
	return out, stale
}

// entryOf converts a SPIRE entry for output.
func entryOf(e *spiretypes.Entry) Entry {
	out := Entry{
		ID: e.GetId(), SPIFFEID: render.SPIFFEIDString(e.GetSpiffeId()), ParentID: render.SPIFFEIDString(e.GetParentId()),
		Selectors: []string{}, X509SVIDTTL: e.GetX509SvidTtl(), JWTSVIDTTL: e.GetJwtSvidTtl(), FederatesWith: e.GetFederatesWith(),
		DNSNames: e.GetDnsNames(), Admin: e.GetAdmin(), Downstream: e.GetDownstream(), Hint: e.GetHint(), StoreSVID: e.GetStoreSvid(),
	}
	for _, s := range e.GetSelectors() {
		out.Selectors = append(out.Selectors, s.GetType()+":"+s.GetValue())
	}
	return out
}

func (x *Explainer) configSummary() ConfigSummary {
	return ConfigSummary{
		TrustDomain: x.cfg.TrustDomain.Name(), ClusterName: x.cfg.ClusterName, ClusterDomain: x.cfg.ClusterDomain,
		ClassName: x.cfg.ClassName, WatchClassless: x.cfg.WatchClassless, IgnoreNamespaces: slices.Clone(x.cfg.IgnoreNamespaces),
		EntryIDPrefix: x.cfg.EntryIDPrefix, ParentIDTemplate: x.cfg.ParentIDTemplate,
	}
}

// summarizePod answers in one line.
func summarizePod(p *Pod) string {
	if !p.Eligible {
		return "No identity: " + p.Message + "."
	}
	counts := map[string]int{}
	for _, e := range p.Entries {
		counts[e.State]++
	}
	var failed []string
	selects := false
	for _, v := range p.ClusterSPIFFEIDs {
		selects = selects || v.Selects
		if v.Selects && v.Reason != ReasonRendered && v.Reason != ReasonMasked {
			failed = append(failed, v.Name+" ("+v.Reason+")")
		}
	}
	if !selects {
		return fmt.Sprintf("No identity: no ClusterSPIFFEID of the controller's class (%q) selects the pod.", p.Config.ClassName)
	}
	written := counts[StateInSync] + counts[StateOutdated] + counts[StateMissing]
	var parts []string
	switch {
	case written == 0:
		parts = append(parts, "No identity: no entry renders")
	case counts[StateInSync] == written:
		parts = append(parts, fmt.Sprintf("%d %s in SPIRE as rendered", written, plural(written, "entry", "entries")))
	default:
		parts = append(parts, fmt.Sprintf("%d %s rendered: %d in sync, %d outdated, %d missing in SPIRE",
			written, plural(written, "entry", "entries"), counts[StateInSync], counts[StateOutdated], counts[StateMissing]))
	}
	if len(failed) > 0 {
		parts = append(parts, "not rendered by "+strings.Join(failed, ", "))
	}
	return strings.Join(parts, "; ") + "."
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
