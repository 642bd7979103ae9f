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
)

// EntryClient is the part of the client that manages registration entries.
// Controllers depend on this interface so that fakes and decorators (dry
// run, metrics) can stand in for the real client.
type EntryClient interface {
	// ListEntries returns every entry, or an error and no entries. Entries may
	// lack the fields no reconciler reads: their expiry and additional
	// attributes.
	ListEntries(ctx context.Context) ([]*types.Entry, error)
	// CreateEntries creates entries, one result per input in input order.
	CreateEntries(ctx context.Context, entries []*types.Entry) ([]EntryResult, error)
	// UpdateEntries updates the fields selected by mask (nil: all fields).
	UpdateEntries(ctx context.Context, entries []*types.Entry, mask *types.EntryMask) ([]EntryResult, error)
	// DeleteEntries deletes entries by ID.
	DeleteEntries(ctx context.Context, ids []string) ([]DeleteResult, error)
}

// EntryPageLister is implemented by entry clients that can hand a listing of every entry over
// one page at a time, so that a caller keeping copies of its own never holds the whole
// decoded list: at 300k entries that is about 200 MB. Decorators implement it by passing it
// on (see ListEntryPages).
type EntryPageLister interface {
	// ListEntryPages calls page with every page of entries in order. An error of SPIRE's or
	// of page ends the listing and is returned; the caller must then drop the pages it had,
	// as ListEntries returns no entries on an error.
	ListEntryPages(ctx context.Context, page func([]*types.Entry) error) error
}

// ListEntryPages lists every entry of c page by page when c is an EntryPageLister, else
// through ListEntries, as one page.
func ListEntryPages(ctx context.Context, c EntryClient, page func([]*types.Entry) error) error {
	if pager, ok := c.(EntryPageLister); ok {
		return pager.ListEntryPages(ctx, page)
	}
	entries, err := c.ListEntries(ctx)
	if err != nil {
		return err
	}
	return page(entries)
}

// FederationClient is the part of the client that manages federation
// relationships with foreign trust domains.
type FederationClient interface {
	// ListFederationRelationships returns every relationship, or an error
	// and none.
	ListFederationRelationships(ctx context.Context) ([]*types.FederationRelationship, error)
	// CreateFederationRelationships creates relationships, one result per
	// input in input order.
	CreateFederationRelationships(ctx context.Context, rels []*types.FederationRelationship) ([]FederationResult, error)
	// UpdateFederationRelationships updates the fields selected by mask
	// (nil: all fields).
	UpdateFederationRelationships(ctx context.Context, rels []*types.FederationRelationship, mask *types.FederationRelationshipMask) ([]FederationResult, error)
	// DeleteFederationRelationships deletes relationships by trust domain
	// name.
	DeleteFederationRelationships(ctx context.Context, trustDomains []string) ([]DeleteResult, error)
}

// API is everything spire-registrar uses of a SPIRE server's admin API.
type API interface {
	EntryClient
	FederationClient
}

var _ API = (*Client)(nil)
