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
	"fmt"

	trustdomainv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/trustdomain/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// FederationResult is the outcome of creating or updating one federation
// relationship.
type FederationResult struct {
	// Relationship is the relationship as echoed by the server; nil when Err
	// is set.
	Relationship *types.FederationRelationship
	// Err is nil when the item's status is OK, an *ItemError otherwise.
	Err error
}

// ListFederationRelationships returns all federation relationships, paging
// through the server PageSize at a time. On any error, including one on a
// later page, it returns the error and no relationships.
func (c *Client) ListFederationRelationships(ctx context.Context) ([]*types.FederationRelationship, error) {
	return listAll(ctx, "ListFederationRelationships", "list federation relationships", func(ctx context.Context, token string) ([]*types.FederationRelationship, string, error) {
		resp, err := c.tds.ListFederationRelationships(ctx, &trustdomainv1.ListFederationRelationshipsRequest{
			PageSize:  c.pageSize(),
			PageToken: token,
		})
		return resp.GetFederationRelationships(), resp.GetNextPageToken(), err
	})
}

// CreateFederationRelationships creates relationships in batches of at most
// BatchSize and returns one result per relationship in input order. An
// RPC-level failure is returned as the error together with the results of
// the batches completed before it (a prefix of rels).
func (c *Client) CreateFederationRelationships(ctx context.Context, rels []*types.FederationRelationship) ([]FederationResult, error) {
	if err := noNil(rels, "federation relationship"); err != nil {
		return nil, fmt.Errorf("create federation relationships: %w", err)
	}
	return inBatches(ctx, "BatchCreateFederationRelationship", "create federation relationships", c.batchSize(), rels,
		func(ctx context.Context, batch []*types.FederationRelationship) ([]*trustdomainv1.BatchCreateFederationRelationshipResponse_Result, error) {
			resp, err := c.tds.BatchCreateFederationRelationship(ctx, &trustdomainv1.BatchCreateFederationRelationshipRequest{FederationRelationships: batch})
			return resp.GetResults(), err
		},
		func(rel *types.FederationRelationship, r *trustdomainv1.BatchCreateFederationRelationshipResponse_Result) FederationResult {
			return FederationResult{Relationship: r.GetFederationRelationship(),
				Err: itemErr("create federation relationship", rel.GetTrustDomain(), r.GetStatus())}
		})
}

// UpdateFederationRelationships updates relationships, matched by trust
// domain, in batches of at most BatchSize and returns one result per
// relationship in input order. mask selects the fields to write; nil writes
// every field. Errors and partial results are as for
// CreateFederationRelationships.
func (c *Client) UpdateFederationRelationships(ctx context.Context, rels []*types.FederationRelationship, mask *types.FederationRelationshipMask) ([]FederationResult, error) {
	if err := noNil(rels, "federation relationship"); err != nil {
		return nil, fmt.Errorf("update federation relationships: %w", err)
	}
	return inBatches(ctx, "BatchUpdateFederationRelationship", "update federation relationships", c.batchSize(), rels,
		func(ctx context.Context, batch []*types.FederationRelationship) ([]*trustdomainv1.BatchUpdateFederationRelationshipResponse_Result, error) {
			resp, err := c.tds.BatchUpdateFederationRelationship(ctx,
				&trustdomainv1.BatchUpdateFederationRelationshipRequest{FederationRelationships: batch, InputMask: mask})
			return resp.GetResults(), err
		},
		func(rel *types.FederationRelationship, r *trustdomainv1.BatchUpdateFederationRelationshipResponse_Result) FederationResult {
			return FederationResult{Relationship: r.GetFederationRelationship(),
				Err: itemErr("update federation relationship", rel.GetTrustDomain(), r.GetStatus())}
		})
}

// DeleteFederationRelationships deletes relationships by trust domain name
// in batches of at most BatchSize and returns one result per name in input
// order (DeleteResult.ID is the name as given); a relationship that does
// not exist fails with NOT_FOUND. Errors and partial results are as for
// CreateFederationRelationships.
func (c *Client) DeleteFederationRelationships(ctx context.Context, trustDomains []string) ([]DeleteResult, error) {
	return inBatches(ctx, "BatchDeleteFederationRelationship", "delete federation relationships", c.batchSize(), trustDomains,
		func(ctx context.Context, batch []string) ([]*trustdomainv1.BatchDeleteFederationRelationshipResponse_Result, error) {
			resp, err := c.tds.BatchDeleteFederationRelationship(ctx, &trustdomainv1.BatchDeleteFederationRelationshipRequest{TrustDomains: batch})
			return resp.GetResults(), err
		},
		func(td string, r *trustdomainv1.BatchDeleteFederationRelationshipResponse_Result) DeleteResult {
			return DeleteResult{ID: td, Err: itemErr("delete federation relationship", td, r.GetStatus())}
		})
}
