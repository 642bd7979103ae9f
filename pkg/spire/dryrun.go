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

	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// DryRun wraps a client so that reads go to SPIRE and writes go nowhere: each write answers
// as SPIRE would on success, so the caller's view moves on as if it had been applied and every
// planned change is reported once. It is how spire-registrar is adopted safely on a server that
// already holds entries.
func DryRun(inner API) API {
	return &dryRun{API: inner}
}

type dryRun struct {
	API
}

func (d *dryRun) CreateEntries(_ context.Context, entries []*types.Entry) ([]EntryResult, error) {
	out := make([]EntryResult, len(entries))
	for i, e := range entries {
		echo := proto.Clone(e).(*types.Entry)
		if echo.Id == "" {
			echo.Id = "dry-run-" + string(uuid.NewUUID())
		}
		out[i] = EntryResult{Entry: echo}
	}
	return out, nil
}

func (d *dryRun) UpdateEntries(_ context.Context, entries []*types.Entry, _ *types.EntryMask) ([]EntryResult, error) {
	out := make([]EntryResult, len(entries))
	for i, e := range entries {
		out[i] = EntryResult{Entry: proto.Clone(e).(*types.Entry)}
	}
	return out, nil
}

func (d *dryRun) DeleteEntries(_ context.Context, ids []string) ([]DeleteResult, error) {
	out := make([]DeleteResult, len(ids))
	for i, id := range ids {
		out[i] = DeleteResult{ID: id}
	}
	return out, nil
}

func (d *dryRun) CreateFederationRelationships(_ context.Context, rels []*types.FederationRelationship) ([]FederationResult, error) {
	out := make([]FederationResult, len(rels))
	for i, r := range rels {
		out[i] = FederationResult{Relationship: proto.Clone(r).(*types.FederationRelationship)}
	}
	return out, nil
}

func (d *dryRun) UpdateFederationRelationships(_ context.Context, rels []*types.FederationRelationship, _ *types.FederationRelationshipMask) ([]FederationResult, error) {
	return d.CreateFederationRelationships(context.Background(), rels)
}

func (d *dryRun) DeleteFederationRelationships(_ context.Context, trustDomains []string) ([]DeleteResult, error) {
	return d.DeleteEntries(context.Background(), trustDomains)
}
