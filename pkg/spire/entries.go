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

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// EntryResult is the outcome of creating or updating one entry.
type EntryResult struct {
	// Entry is the entry as echoed by the server: set on success and, for a
	// create that fails with ALREADY_EXISTS because a similar entry (same
	// SPIFFE ID, parent ID and selector set) exists, set to that existing
	// entry. Nil on any other failure, including ALREADY_EXISTS caused by a
	// caller-chosen ID that is already taken.
	Entry *types.Entry
	// Err is nil when the item's status is OK, an *ItemError otherwise.
	Err error
}

// ListedEntryFields returns the fields ListEntries asks for: every field the
// controller writes, compares, keys entries on or decides ownership by, plus
// the creation time (the oldest of duplicates is kept) and the revision
// number (a resync's list is merged with concurrent writes by it). An
// entry's expiry and SPIRE 1.15's additional attributes are neither declared
// nor compared, so they are not sent. A server that does not know a field
// ignores its bit. The reconciler's table of entry fields says which are
// listed; its tests check this mask against it.
func ListedEntryFields() *types.EntryMask {
	return &types.EntryMask{
		SpiffeId:       true,
		ParentId:       true,
		Selectors:      true,
		X509SvidTtl:    true,
		FederatesWith:  true,
		Admin:          true,
		Downstream:     true,
		DnsNames:       true,
		RevisionNumber: true,
		StoreSvid:      true,
		JwtSvidTtl:     true,
		Hint:           true,
		CreatedAt:      true,
	}
}

// ListEntries returns all registration entries, paging through the server
// PageSize entries at a time. Entries carry the fields of ListedEntryFields:
// not their expiry nor their additional attributes. On any error, including
// one on a later page, it returns the error and no entries.
func (c *Client) ListEntries(ctx context.Context) ([]*types.Entry, error) {
	return listAll(ctx, "ListEntries", "list entries", c.listEntriesPage)
}

// ListEntryPages lists every entry as ListEntries does, handing each page to page as it
// arrives (see EntryPageLister).
func (c *Client) ListEntryPages(ctx context.Context, page func([]*types.Entry) error) error {
	return eachPage(ctx, "ListEntries", "list entries", c.listEntriesPage, page)
}

func (c *Client) listEntriesPage(ctx context.Context, token string) ([]*types.Entry, string, error) {
	resp, err := c.entries.ListEntries(ctx, &entryv1.ListEntriesRequest{
		PageSize:   c.pageSize(),
		PageToken:  token,
		OutputMask: ListedEntryFields(),
	})
	return resp.GetEntries(), resp.GetNextPageToken(), err
}

// CreateEntries creates entries in batches of at most BatchSize and returns
// one result per entry in input order. Entries without an ID get one from
// the server. An RPC-level failure is returned as the error together with
// the results of the batches completed before it (a prefix of entries);
// see EntryResult for how ALREADY_EXISTS is reported.
func (c *Client) CreateEntries(ctx context.Context, entries []*types.Entry) ([]EntryResult, error) {
	if err := noNil(entries, "entry"); err != nil {
		return nil, fmt.Errorf("create entries: %w", err)
	}
	return inBatches(ctx, "BatchCreateEntry", "create entries", c.batchSize(), entries,
		func(ctx context.Context, batch []*types.Entry) ([]*entryv1.BatchCreateEntryResponse_Result, error) {
			resp, err := c.entries.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: batch})
			return resp.GetResults(), err
		},
		func(e *types.Entry, r *entryv1.BatchCreateEntryResponse_Result) EntryResult {
			return EntryResult{Entry: r.GetEntry(), Err: itemErr("create entry", entryKey(e), r.GetStatus())}
		})
}

// UpdateEntries updates entries, matched by ID, in batches of at most
// BatchSize and returns one result per entry in input order. mask selects
// the fields to write; nil writes every field, so unset fields are cleared.
// Errors and partial results are as for CreateEntries; a missing ID fails
// the item with NOT_FOUND.
func (c *Client) UpdateEntries(ctx context.Context, entries []*types.Entry, mask *types.EntryMask) ([]EntryResult, error) {
	if err := noNil(entries, "entry"); err != nil {
		return nil, fmt.Errorf("update entries: %w", err)
	}
	return inBatches(ctx, "BatchUpdateEntry", "update entries", c.batchSize(), entries,
		func(ctx context.Context, batch []*types.Entry) ([]*entryv1.BatchUpdateEntryResponse_Result, error) {
			resp, err := c.entries.BatchUpdateEntry(ctx, &entryv1.BatchUpdateEntryRequest{Entries: batch, InputMask: mask})
			return resp.GetResults(), err
		},
		func(e *types.Entry, r *entryv1.BatchUpdateEntryResponse_Result) EntryResult {
			return EntryResult{Entry: r.GetEntry(), Err: itemErr("update entry", entryKey(e), r.GetStatus())}
		})
}

// DeleteEntries deletes entries by ID in batches of at most BatchSize and
// returns one result per ID in input order; an ID that does not exist fails
// with NOT_FOUND (see IsNotFound). Errors and partial results are as for
// CreateEntries.
func (c *Client) DeleteEntries(ctx context.Context, ids []string) ([]DeleteResult, error) {
	return inBatches(ctx, "BatchDeleteEntry", "delete entries", c.batchSize(), ids,
		func(ctx context.Context, batch []string) ([]*entryv1.BatchDeleteEntryResponse_Result, error) {
			resp, err := c.entries.BatchDeleteEntry(ctx, &entryv1.BatchDeleteEntryRequest{Ids: batch})
			return resp.GetResults(), err
		},
		func(id string, r *entryv1.BatchDeleteEntryResponse_Result) DeleteResult {
			return DeleteResult{ID: id, Err: itemErr("delete entry", id, r.GetStatus())}
		})
}

// entryKey names an entry in errors: its ID, or its SPIFFE ID before the
// server has assigned one.
func entryKey(e *types.Entry) string {
	if e.GetId() != "" {
		return e.GetId()
	}
	if id := e.GetSpiffeId(); id != nil {
		return "spiffe://" + id.GetTrustDomain() + id.GetPath()
	}
	return ""
}
