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
	"io"

	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// DryRun wraps a client so that reads go to SPIRE and writes go nowhere: each write answers
// as SPIRE would on success, so the caller's view moves on as if it had been applied and every
// planned change is reported once. It is how spire-registrar is adopted safely on a server that
// already holds entries.
//
// When plan is not nil, every write is also recorded on it as one JSON line (see PlannedWrite),
// for review. A write that cannot be recorded fails, so that no planned change goes unrecorded.
func DryRun(inner API, plan io.Writer) API {
	d := &dryRun{API: inner}
	if plan != nil {
		d.plan = newPlanWriter(plan)
	}
	return d
}

type dryRun struct {
	API
	// plan records planned writes; nil records nothing.
	plan *planWriter
}

// ListEntryPages lists page by page through the inner client: a dry run reads as a run does.
func (d *dryRun) ListEntryPages(ctx context.Context, page func([]*types.Entry) error) error {
	return ListEntryPages(ctx, d.API, page)
}

func (d *dryRun) record(writes []PlannedWrite) error {
	if d.plan == nil {
		return nil
	}
	if err := d.plan.write(writes); err != nil {
		return fmt.Errorf("recording the dry-run plan: %w", err)
	}
	return nil
}

func (d *dryRun) CreateEntries(_ context.Context, entries []*types.Entry) ([]EntryResult, error) {
	if err := d.record(entryWrites(OpCreate, entries, nil)); err != nil {
		return nil, err
	}
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

func (d *dryRun) UpdateEntries(_ context.Context, entries []*types.Entry, mask *types.EntryMask) ([]EntryResult, error) {
	if err := d.record(entryWrites(OpUpdate, entries, mask)); err != nil {
		return nil, err
	}
	out := make([]EntryResult, len(entries))
	for i, e := range entries {
		out[i] = EntryResult{Entry: proto.Clone(e).(*types.Entry)}
	}
	return out, nil
}

func (d *dryRun) DeleteEntries(_ context.Context, ids []string) ([]DeleteResult, error) {
	writes := make([]PlannedWrite, len(ids))
	for i, id := range ids {
		writes[i] = PlannedWrite{Op: OpDelete, Kind: KindEntry, ID: id}
	}
	if err := d.record(writes); err != nil {
		return nil, err
	}
	return deleted(ids), nil
}

func (d *dryRun) CreateFederationRelationships(_ context.Context, rels []*types.FederationRelationship) ([]FederationResult, error) {
	if err := d.record(relationshipWrites(OpCreate, rels, nil)); err != nil {
		return nil, err
	}
	return echoRelationships(rels), nil
}

func (d *dryRun) UpdateFederationRelationships(_ context.Context, rels []*types.FederationRelationship, mask *types.FederationRelationshipMask) ([]FederationResult, error) {
	if err := d.record(relationshipWrites(OpUpdate, rels, mask)); err != nil {
		return nil, err
	}
	return echoRelationships(rels), nil
}

func (d *dryRun) DeleteFederationRelationships(_ context.Context, trustDomains []string) ([]DeleteResult, error) {
	writes := make([]PlannedWrite, len(trustDomains))
	for i, td := range trustDomains {
		writes[i] = PlannedWrite{Op: OpDelete, Kind: KindFederationRelationship, TrustDomain: td}
	}
	if err := d.record(writes); err != nil {
		return nil, err
	}
	return deleted(trustDomains), nil
}

func echoRelationships(rels []*types.FederationRelationship) []FederationResult {
	out := make([]FederationResult, len(rels))
	for i, r := range rels {
		out[i] = FederationResult{Relationship: proto.Clone(r).(*types.FederationRelationship)}
	}
	return out
}

func deleted(ids []string) []DeleteResult {
	out := make([]DeleteResult, len(ids))
	for i, id := range ids {
		out[i] = DeleteResult{ID: id}
	}
	return out
}
