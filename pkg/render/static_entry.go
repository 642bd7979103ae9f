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
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// StaticEntry validates a ClusterStaticEntry and turns it into the entry it declares, with the
// ClusterStaticEntry as its declarer. Every problem names the field it is in, since it ends
// up in an Event a person reads.
func (r *Renderer) StaticEntry(cse *spirev1alpha1.ClusterStaticEntry) (*DeclaredEntry, error) {
	e, err := r.staticEntry(&cse.Spec)
	if err != nil {
		return nil, err
	}
	return NewDeclaredEntry(e, Declarer{Kind: KindClusterStaticEntry, Name: cse.Name, UID: cse.UID,
		Created: cse.CreationTimestamp.Time, Deleted: deletionTime(cse.DeletionTimestamp)}), nil
}

func (r *Renderer) staticEntry(spec *spirev1alpha1.ClusterStaticEntrySpec) (*spiretypes.Entry, error) {
	spiffeID, err := r.parseID("spiffeID", spec.SPIFFEID)
	if err != nil {
		return nil, err
	}
	parentID, err := r.parseID("parentID", spec.ParentID)
	if err != nil {
		return nil, err
	}
	if len(spec.Selectors) == 0 {
		return nil, errors.New("selectors: at least one selector is required")
	}
	selectors := make([]*spiretypes.Selector, 0, len(spec.Selectors))
	for i, s := range spec.Selectors {
		sel, err := parseSelector(s)
		if err != nil {
			return nil, fmt.Errorf("selectors[%d]: %w", i, err)
		}
		// Pod entries are found by this selector; a static entry carrying it would be taken
		// for one and deleted with the pod.
		if sel.Type == "k8s" && strings.HasPrefix(sel.Value, PodUIDSelectorPrefix) {
			return nil, fmt.Errorf("selectors[%d]: %q is reserved for the entries of ClusterSPIFFEIDs", i, s)
		}
		selectors = append(selectors, sel)
	}
	var federatesWith []string
	for i, name := range spec.FederatesWith {
		td, err := spiffeid.TrustDomainFromString(name)
		if err != nil {
			return nil, fmt.Errorf("federatesWith[%d]: %w", i, err)
		}
		federatesWith = append(federatesWith, td.Name())
	}
	for i, name := range spec.DNSNames {
		if err := validateDNSName(name); err != nil {
			return nil, fmt.Errorf("dnsNames[%d]: %w", i, err)
		}
	}
	if spec.X509SVIDTTL.Duration < 0 {
		return nil, errors.New("x509SVIDTTL: must not be negative")
	}
	if spec.JWTSVIDTTL.Duration < 0 {
		return nil, errors.New("jwtSVIDTTL: must not be negative")
	}
	return &spiretypes.Entry{
		SpiffeId:      spiffeID,
		ParentId:      parentID,
		Selectors:     selectors,
		X509SvidTtl:   ttlSeconds(spec.X509SVIDTTL.Duration),
		JwtSvidTtl:    ttlSeconds(spec.JWTSVIDTTL.Duration),
		FederatesWith: federatesWith,
		Admin:         spec.Admin,
		Downstream:    spec.Downstream,
		DnsNames:      dedupe(spec.DNSNames),
		Hint:          spec.Hint,
		StoreSvid:     spec.StoreSVID,
	}, nil
}
