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
	"slices"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Renderer renders entries for one trust domain and cluster.
type Renderer struct {
	trustDomain   spiffeid.TrustDomain
	clusterName   string
	clusterDomain string
	parentID      *compiledTemplate
	// reach is what the parent ID template reads of the node.
	reach Reach
}

// Settings are what a cluster's entries are rendered with.
type Settings struct {
	// TrustDomain every rendered SPIFFE ID and parent ID must belong to.
	TrustDomain spiffeid.TrustDomain
	// ClusterName and ClusterDomain are offered to templates.
	ClusterName, ClusterDomain string
	// ParentIDTemplate renders each pod entry's parent ID.
	ParentIDTemplate string
}

// NewRenderer parses the parent ID template every pod entry is rendered with.
func NewRenderer(s Settings) (*Renderer, error) {
	parentID, err := parseTemplate("parentIDTemplate", s.ParentIDTemplate)
	if err != nil {
		return nil, err
	}
	return &Renderer{trustDomain: s.TrustDomain, clusterName: s.ClusterName, clusterDomain: s.ClusterDomain, parentID: parentID,
		reach: TemplateReach(parentID.Template)}, nil
}

// PodDeclaresEntries reports whether a pod can have entries at all: pods that have finished
// declare nothing (a deliberate difference from spire-controller-manager, which keeps their
// entries until the pod is deleted). A pod that runs nowhere yet takes part, and fails to
// render with ErrNodeNotFound.
func PodDeclaresEntries(pod *corev1.Pod) bool {
	return PhaseDeclaresEntries(pod.Status.Phase)
}

// PhaseDeclaresEntries is PodDeclaresEntries of a pod in phase.
func PhaseDeclaresEntries(phase corev1.PodPhase) bool {
	return phase != corev1.PodSucceeded && phase != corev1.PodFailed
}

// ErrNodeNotFound is the render failure of a pod whose node is unknown, or that is not
// scheduled yet. spire-controller-manager counts such pods as render failures, and so does
// the status here.
var ErrNodeNotFound = errors.New("node not found")

// Failure is a ClusterSPIFFEID that applies to a pod but renders no valid entry for it.
type Failure struct {
	ClusterSPIFFEID *ClusterSPIFFEID
	Err             error
}

// PodEntries renders the entries that clusterSPIFFEIDs declare for a pod in namespace ns,
// running on node (nil when unknown or not scheduled), targeted by slices. Every ClusterSPIFFEID that selects the pod takes part,
// the regular ones first; each either declares one entry or is a Failure. A fallback one is
// skipped, as in spire-controller-manager, once a regular one has rendered an entry for the
// pod: a regular one that fails to render does not suppress the fallback.
func (r *Renderer) PodEntries(clusterSPIFFEIDs []*ClusterSPIFFEID, pod *corev1.Pod, ns *corev1.Namespace, node *corev1.Node,
	slices []*discoveryv1.EndpointSlice) ([]*DeclaredEntry, []Failure) {
	regular, fallback := SelectingClusterSPIFFEIDs(clusterSPIFFEIDs, ns, pod)
	services := ServicesOfPod(slices, pod)
	var declared []*DeclaredEntry
	var failures []Failure
	render := func(c *ClusterSPIFFEID) {
		if node == nil {
			failures = append(failures, Failure{ClusterSPIFFEID: c, Err: fmt.Errorf("%w: %q", ErrNodeNotFound, pod.Spec.NodeName)})
			return
		}
		e, err := r.PodEntry(c, pod, node, services)
		if err != nil {
			failures = append(failures, Failure{ClusterSPIFFEID: c, Err: err})
			return
		}
		declared = append(declared, NewDeclaredEntry(e, c.Declarer(pod.UID)))
	}
	for _, c := range regular {
		render(c)
	}
	if len(declared) == 0 {
		for _, c := range fallback {
			render(c)
		}
	}
	return declared, failures
}

// PodEntry renders a ClusterSPIFFEID's entry for a pod on node. The entry carries the pod's
// UID as its first selector; SPIFFE and parent IDs outside the trust domain are errors, never
// entries.
//
// services are the Services targeting the pod; with autoPopulateDNSNames their DNS names follow
// the templated ones.
func (r *Renderer) PodEntry(c *ClusterSPIFFEID, pod *corev1.Pod, node *corev1.Node, services []string) (*spiretypes.Entry, error) {
	if c.Err != nil {
		return nil, c.Err
	}
	// The parent ID template sees only the node, as in spire-controller-manager. All the
	// templates of the entry spend one budget.
	b := &budget{}
	parentData := &renderInput{trustDomain: r.trustDomain.Name(), clusterName: r.clusterName, clusterDomain: r.clusterDomain,
		node: node, reach: r.reach, budget: b}
	parentID, err := r.renderID(r.parentID, parentData)
	if err != nil {
		return nil, err
	}
	data := &renderInput{trustDomain: r.trustDomain.Name(), clusterName: r.clusterName, clusterDomain: r.clusterDomain,
		pod: pod, node: node, reach: c.reach, budget: b}
	spiffeID, err := r.renderID(c.spiffeID, data)
	if err != nil {
		return nil, err
	}

	selectors := []*spiretypes.Selector{{Type: "k8s", Value: PodUIDSelectorPrefix + string(pod.UID)}}
	for _, t := range c.workloadSelectors {
		text, err := execute(t, data)
		if err != nil {
			return nil, err
		}
		s, err := parseSelector(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
		// Pod entries are found by this selector; a second one would file the entry under
		// another pod.
		if s.Type == "k8s" && strings.HasPrefix(s.Value, PodUIDSelectorPrefix) {
			return nil, fmt.Errorf("%s: %q is reserved: the controller adds the pod's own", t.Name(), text)
		}
		selectors = append(selectors, s)
	}

	var dnsNames []string
	for _, t := range c.dnsNames {
		name, err := execute(t, data)
		if err != nil {
			return nil, err
		}
		if err := validateDNSName(name); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
		dnsNames = append(dnsNames, name)
	}
	if c.Spec.AutoPopulateDNSNames {
		dnsNames = append(dnsNames, ServiceDNSNames(services, pod.Namespace, r.clusterDomain)...)
	}

	return &spiretypes.Entry{
		SpiffeId:      spiffeID,
		ParentId:      parentID,
		Selectors:     selectors,
		X509SvidTtl:   ttlSeconds(c.Spec.TTL.Duration),
		JwtSvidTtl:    ttlSeconds(c.Spec.JWTTTL.Duration),
		FederatesWith: c.federatesWith,
		Admin:         c.Spec.Admin,
		Downstream:    c.Spec.Downstream,
		DnsNames:      dedupe(dnsNames),
		Hint:          c.Spec.Hint,
	}, nil
}

// renderID renders a template into a SPIFFE ID that must belong to the trust domain.
func (r *Renderer) renderID(t *compiledTemplate, data *renderInput) (*spiretypes.SPIFFEID, error) {
	text, err := execute(t, data)
	if err != nil {
		return nil, err
	}
	return r.parseID(t.Name(), text)
}

// parseID parses a literal SPIFFE ID that must belong to the trust domain.
func (r *Renderer) parseID(field, text string) (*spiretypes.SPIFFEID, error) {
	id, err := spiffeid.FromString(text)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid SPIFFE ID %q: %w", field, text, err)
	}
	if !id.MemberOf(r.trustDomain) {
		return nil, fmt.Errorf("%s: %q is outside trust domain %q", field, text, r.trustDomain.Name())
	}
	return &spiretypes.SPIFFEID{TrustDomain: id.TrustDomain().Name(), Path: id.Path()}, nil
}

// SlicePods returns the "namespace/name" of every pod a slice targets, ready or not.
func SlicePods(slice *discoveryv1.EndpointSlice) []string {
	var pods []string
	for _, ep := range slice.Endpoints {
		if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" && ref.Name != "" {
			ns := ref.Namespace
			if ns == "" {
				ns = slice.Namespace
			}
			pods = append(pods, ns+"/"+ref.Name)
		}
	}
	return pods
}

// ServiceOf returns the name of the Service a slice belongs to, or "".
func ServiceOf(slice *discoveryv1.EndpointSlice) string {
	return slice.Labels[discoveryv1.LabelServiceName]
}

// ServicesOfPod returns, sorted, the names of the Services whose slices in the pod's namespace
// list the pod as v1 Endpoints would list it, which is what spire-controller-manager reads:
// an endpoint whose target is this pod (by UID when the slice names one, so a pod that reuses
// a name is not taken for its predecessor), ready or not, but not one that is terminating
// and not ready, which the Endpoints controller leaves out.
func ServicesOfPod(endpointSlices []*discoveryv1.EndpointSlice, pod *corev1.Pod) []string {
	var services []string
	for _, slice := range endpointSlices {
		if slice.Namespace != pod.Namespace || !sliceListsPod(slice, pod) {
			continue
		}
		if svc := ServiceOf(slice); svc != "" {
			services = append(services, svc)
		}
	}
	slices.Sort(services)
	return slices.Compact(services)
}

func sliceListsPod(slice *discoveryv1.EndpointSlice, pod *corev1.Pod) bool {
	for _, ep := range slice.Endpoints {
		ref := ep.TargetRef
		if ref == nil || ref.Kind != "Pod" || ref.Name != pod.Name || (ref.Namespace != "" && ref.Namespace != pod.Namespace) {
			continue
		}
		if (ref.UID == "" || ref.UID == pod.UID) && listedInEndpoints(ep) {
			return true
		}
	}
	return false
}

// listedInEndpoints reports whether v1 Endpoints list an endpoint, as a ready or a not-ready
// address: they leave out only terminating pods that are not ready (the slice marks those
// served with publishNotReadyAddresses as ready).
func listedInEndpoints(ep discoveryv1.Endpoint) bool {
	ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
	terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
	return ready || !terminating
}

// SliceListedPods returns "namespace/name/uid" for every pod the slice lists as v1 Endpoints
// would: a change to it changes the DNS names of those pods.
func SliceListedPods(slice *discoveryv1.EndpointSlice) []string {
	var pods []string
	for _, ep := range slice.Endpoints {
		if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" && ref.Name != "" && listedInEndpoints(ep) {
			ns := ref.Namespace
			if ns == "" {
				ns = slice.Namespace
			}
			pods = append(pods, ns+"/"+ref.Name+"/"+string(ref.UID))
		}
	}
	slices.Sort(pods)
	return pods
}

// ServiceDNSNames are the names a pod is reachable by through its Services, as
// spire-controller-manager's autoPopulateDNSNames produces them, sorted.
func ServiceDNSNames(services []string, namespace, clusterDomain string) []string {
	var names []string
	for _, svc := range services {
		names = append(names, svc, svc+"."+namespace, svc+"."+namespace+".svc")
		if clusterDomain != "" {
			names = append(names, svc+"."+namespace+".svc."+clusterDomain)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
