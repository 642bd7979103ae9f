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

package entry

import (
	"fmt"
	"strings"
	"text/template"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
)

// renderer turns a pod and an identity that applies to it into the entry SPIRE should hold.
// It is pure: everything it needs is passed in.
type renderer struct {
	trustDomain   spiffeid.TrustDomain
	clusterName   string
	clusterDomain string
	parentID      *template.Template
}

func newRenderer(trustDomain spiffeid.TrustDomain, clusterName, clusterDomain, parentIDTemplate string) (*renderer, error) {
	parentID, err := parseTemplate("parentIDTemplate", parentIDTemplate)
	if err != nil {
		return nil, err
	}
	return &renderer{trustDomain: trustDomain, clusterName: clusterName, clusterDomain: clusterDomain, parentID: parentID}, nil
}

// renderPodEntry renders id's entry for a pod on node. The entry carries the pod's UID as its
// first selector; SPIFFE and parent IDs outside the trust domain are errors, never entries.
//
// services are the Services targeting the pod; with autoPopulateDNSNames their DNS names follow
// the templated ones.
func (r *renderer) renderPodEntry(id *podIdentity, pod *corev1.Pod, node *corev1.Node, services []string) (*spiretypes.Entry, error) {
	if id.err != nil {
		return nil, id.err
	}
	data := &templateData{
		TrustDomain:   r.trustDomain.Name(),
		ClusterName:   r.clusterName,
		ClusterDomain: r.clusterDomain,
		PodMeta:       &pod.ObjectMeta,
		PodSpec:       &pod.Spec,
		NodeMeta:      &node.ObjectMeta,
		NodeSpec:      &node.Spec,
	}

	spiffeID, err := r.renderID(id.spiffeID, data)
	if err != nil {
		return nil, err
	}
	parentID, err := r.renderID(r.parentID, data)
	if err != nil {
		return nil, err
	}

	selectors := []*spiretypes.Selector{{Type: "k8s", Value: podUIDSelectorPrefix + string(pod.UID)}}
	for _, t := range id.workloadSelectors {
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
		if s.Type == "k8s" && strings.HasPrefix(s.Value, podUIDSelectorPrefix) {
			return nil, fmt.Errorf("%s: %q is reserved: the controller adds the pod's own", t.Name(), text)
		}
		selectors = append(selectors, s)
	}

	var dnsNames []string
	for _, t := range id.dnsNames {
		name, err := execute(t, data)
		if err != nil {
			return nil, err
		}
		if err := validateDNSName(name); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
		dnsNames = append(dnsNames, name)
	}
	if id.spec.AutoPopulateDNSNames {
		dnsNames = append(dnsNames, serviceDNSNames(services, pod.Namespace, r.clusterDomain)...)
	}

	return &spiretypes.Entry{
		SpiffeId:      spiffeID,
		ParentId:      parentID,
		Selectors:     selectors,
		X509SvidTtl:   ttlSeconds(id.spec.TTL.Duration),
		JwtSvidTtl:    ttlSeconds(id.spec.JWTTTL.Duration),
		FederatesWith: id.federatesWith,
		Admin:         id.spec.Admin,
		Downstream:    id.spec.Downstream,
		DnsNames:      dedupe(dnsNames),
		Hint:          id.spec.Hint,
	}, nil
}

// renderID renders a template into a SPIFFE ID that must belong to the trust domain.
func (r *renderer) renderID(t *template.Template, data *templateData) (*spiretypes.SPIFFEID, error) {
	text, err := execute(t, data)
	if err != nil {
		return nil, err
	}
	return r.parseID(t.Name(), text)
}
