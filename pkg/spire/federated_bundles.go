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

package spire

import (
	"context"
	"crypto/x509"
	"fmt"

	trustdomainv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/trustdomain/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// federatedBundlesPageSize is how many federation relationships one page of
// FederatedX509Authorities holds; each carries its trust domain's bundle.
const federatedBundlesPageSize = 100

// FederatedX509Authorities returns, by trust domain, the X.509 authorities SPIRE holds for
// each trust domain it federates with: the bundle of each federation relationship, as SPIRE
// last fetched it from the bundle endpoint or was given it. A trust domain whose relationship
// is gone is not listed, even though SPIRE keeps its bundle until someone deletes it: the
// federation has ended. A relationship whose bundle holds no X.509 authority yet is listed
// with none.
func (c *AuthorityClient) FederatedX509Authorities(ctx context.Context) (map[string][]X509Authority, error) {
	rels, err := listAll(ctx, "ListFederationRelationships", "list federation relationships", func(ctx context.Context, token string) ([]*types.FederationRelationship, string, error) {
		resp, err := c.tds.ListFederationRelationships(ctx, &trustdomainv1.ListFederationRelationshipsRequest{
			OutputMask: &types.FederationRelationshipMask{TrustDomainBundle: true},
			PageSize:   federatedBundlesPageSize,
			PageToken:  token,
		})
		return resp.GetFederationRelationships(), resp.GetNextPageToken(), err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]X509Authority, len(rels))
	for _, rel := range rels {
		var authorities []X509Authority
		for i, a := range rel.GetTrustDomainBundle().GetX509Authorities() {
			cert, err := x509.ParseCertificate(a.GetAsn1())
			if err != nil {
				return nil, fmt.Errorf("list federation relationships: bundle of %s: X.509 authority %d: %w", rel.GetTrustDomain(), i, err)
			}
			authorities = append(authorities, X509Authority{Certificate: cert, Tainted: a.GetTainted()})
		}
		out[rel.GetTrustDomain()] = authorities
	}
	return out, nil
}
