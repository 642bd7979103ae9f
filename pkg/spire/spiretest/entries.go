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

package spiretest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// entryService implements the entry.v1 API over the Server's state.
type entryService struct {
	entryv1.UnimplementedEntryServer
	s *Server
}

// ListEntries pages in creation order like SPIRE: a page size of zero
// returns everything, and every non-empty page carries a next-page token,
// so a listing ends with an empty page.
func (es *entryService) ListEntries(_ context.Context, req *entryv1.ListEntriesRequest) (*entryv1.ListEntriesResponse, error) {
	s := es.s
	if req.Filter != nil {
		return nil, status.Error(codes.Unimplemented, "spiretest: list filters are not supported")
	}
	page, after, err := parseToken(req.PageToken)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "invalid page token: %v", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failListAfter >= 0 && page == s.failListAfter {
		s.failListAfter = -1
		return nil, status.Errorf(codes.Unavailable, "spiretest: injected failure after %d pages", page)
	}
	stored := make([]*storedEntry, 0, len(s.entries))
	for _, se := range s.entries {
		if se.seq > after {
			stored = append(stored, se)
		}
	}
	sort.Slice(stored, func(i, j int) bool { return stored[i].seq < stored[j].seq })

	resp := &entryv1.ListEntriesResponse{}
	if req.PageSize > 0 && len(stored) > int(req.PageSize) {
		stored = stored[:req.PageSize]
	}
	for _, se := range stored {
		resp.Entries = append(resp.Entries, maskEntry(se.entry, req.OutputMask))
	}
	if req.PageSize > 0 && len(stored) > 0 {
		resp.NextPageToken = fmt.Sprintf("%d:%d", page+1, stored[len(stored)-1].seq)
	}
	return resp, nil
}

// GetEntry returns one entry by ID.
func (es *entryService) GetEntry(_ context.Context, req *entryv1.GetEntryRequest) (*types.Entry, error) {
	s := es.s
	if req.Id == "" {
		return nil, status.Error(codes.InvalidArgument, "missing ID")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.entries[req.Id]
	if se == nil {
		return nil, status.Error(codes.NotFound, "entry not found")
	}
	return maskEntry(se.entry, req.OutputMask), nil
}

// BatchCreateEntry creates entries one by one, in order, as SPIRE does.
func (es *entryService) BatchCreateEntry(_ context.Context, req *entryv1.BatchCreateEntryRequest) (*entryv1.BatchCreateEntryResponse, error) {
	s := es.s
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &entryv1.BatchCreateEntryResponse{}
	for _, e := range req.Entries {
		st, entry := s.createEntry(e)
		r := &entryv1.BatchCreateEntryResponse_Result{Status: st}
		if entry != nil {
			r.Entry = maskEntry(entry, req.OutputMask)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (s *Server) createEntry(in *types.Entry) (*types.Status, *types.Entry) {
	federatesWith, err := checkEntry(s.trustDomain, in, nil)
	if err != nil {
		return itemStatus(codes.InvalidArgument, "failed to convert entry: %v", err), nil
	}
	e := proto.CloneOf(in)
	e.FederatesWith = federatesWith
	e.RevisionNumber = 0
	if err := checkStoredEntry(e); err != nil {
		return itemStatus(codes.InvalidArgument, "failed to create entry: datastore-validation: %v", err), nil
	}
	// SPIRE looks for a similar entry before anything else and returns it
	// instead of creating a duplicate.
	for _, se := range s.entries {
		if similar(se.entry, e) {
			return itemStatus(codes.AlreadyExists, "similar entry already exists"), se.entry
		}
	}
	if e.Id == "" {
		e.Id = newID()
	} else if s.entries[e.Id] != nil {
		// A taken caller-chosen ID trips the datastore's unique constraint;
		// SPIRE reports it as ALREADY_EXISTS without an entry.
		return itemStatus(codes.AlreadyExists, "failed to create entry: datastore-sql: UNIQUE constraint failed: registered_entries.entry_id"), nil
	}
	if err := s.checkBundles(e.FederatesWith); err != nil {
		return itemStatus(codes.Internal, "failed to create entry: %v", err), nil
	}
	e.CreatedAt = time.Now().Unix()
	s.seq++
	s.entries[e.Id] = &storedEntry{seq: s.seq, entry: e}
	return itemStatus(codes.OK, "OK"), e
}

// BatchUpdateEntry writes the fields selected by the input mask (nil: all)
// and bumps the revision number. Like SPIRE it does not check the result
// for similarity with other entries.
func (es *entryService) BatchUpdateEntry(_ context.Context, req *entryv1.BatchUpdateEntryRequest) (*entryv1.BatchUpdateEntryResponse, error) {
	s := es.s
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &entryv1.BatchUpdateEntryResponse{}
	for _, e := range req.Entries {
		st, entry := s.updateEntry(e, req.InputMask)
		r := &entryv1.BatchUpdateEntryResponse_Result{Status: st}
		if entry != nil {
			r.Entry = maskEntry(entry, req.OutputMask)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (s *Server) updateEntry(in *types.Entry, mask *types.EntryMask) (*types.Status, *types.Entry) {
	federatesWith, err := checkEntry(s.trustDomain, in, mask)
	if err != nil {
		return itemStatus(codes.InvalidArgument, "failed to convert entry: %v", err), nil
	}
	if mask == nil {
		mask = allEntryFields
	}
	if (mask.X509SvidTtl && in.X509SvidTtl < 0) || (mask.JwtSvidTtl && in.JwtSvidTtl < 0) {
		return itemStatus(codes.InvalidArgument, "failed to update entry: datastore-validation: invalid registration entry: TTL is not set"), nil
	}
	se := s.entries[in.Id]
	if se == nil {
		return itemStatus(codes.NotFound, "failed to update entry: datastore-sql: record not found"), nil
	}
	if mask.FederatesWith {
		if err := s.checkBundles(federatesWith); err != nil {
			return itemStatus(codes.Internal, "failed to update entry: %v", err), nil
		}
	}
	e := proto.CloneOf(se.entry)
	if mask.SpiffeId {
		e.SpiffeId = proto.CloneOf(in.SpiffeId)
	}
	if mask.ParentId {
		e.ParentId = proto.CloneOf(in.ParentId)
	}
	if mask.Selectors {
		e.Selectors = cloneSelectors(in.Selectors)
	}
	if mask.X509SvidTtl {
		e.X509SvidTtl = in.X509SvidTtl
	}
	if mask.FederatesWith {
		e.FederatesWith = federatesWith
	}
	if mask.Admin {
		e.Admin = in.Admin
	}
	if mask.Downstream {
		e.Downstream = in.Downstream
	}
	if mask.ExpiresAt {
		e.ExpiresAt = in.ExpiresAt
	}
	if mask.DnsNames {
		e.DnsNames = append([]string(nil), in.DnsNames...)
	}
	if mask.StoreSvid {
		e.StoreSvid = in.StoreSvid
	}
	if mask.JwtSvidTtl {
		e.JwtSvidTtl = in.JwtSvidTtl
	}
	if mask.Hint {
		e.Hint = in.Hint
	}
	if err := checkStoredEntry(e); err != nil {
		return itemStatus(codes.InvalidArgument, "failed to update entry: datastore-validation: %v", err), nil
	}
	e.RevisionNumber++
	se.entry = e
	return itemStatus(codes.OK, "OK"), e
}

// BatchDeleteEntry deletes entries by ID, reporting NOT_FOUND per item.
func (es *entryService) BatchDeleteEntry(_ context.Context, req *entryv1.BatchDeleteEntryRequest) (*entryv1.BatchDeleteEntryResponse, error) {
	s := es.s
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &entryv1.BatchDeleteEntryResponse{}
	for _, id := range req.Ids {
		var st *types.Status
		switch {
		case id == "":
			st = itemStatus(codes.InvalidArgument, "missing entry ID")
		case s.entries[id] == nil:
			st = itemStatus(codes.NotFound, "entry not found")
		default:
			delete(s.entries, id)
			st = itemStatus(codes.OK, "OK")
		}
		resp.Results = append(resp.Results, &entryv1.BatchDeleteEntryResponse_Result{Status: st, Id: id})
	}
	return resp, nil
}

// checkBundles enforces RequireFederatedBundles.
func (s *Server) checkBundles(federatesWith []string) error {
	if !s.requireBundles {
		return nil
	}
	for _, name := range federatesWith {
		id := "spiffe://" + name
		if !s.bundles[id] {
			return fmt.Errorf("unable to find federated bundle %q", id)
		}
	}
	return nil
}

// maskEntry returns a copy of e with the fields mask leaves out cleared;
// the ID is always kept, as in SPIRE.
func maskEntry(e *types.Entry, mask *types.EntryMask) *types.Entry {
	out := proto.CloneOf(e)
	if mask == nil {
		return out
	}
	if !mask.SpiffeId {
		out.SpiffeId = nil
	}
	if !mask.ParentId {
		out.ParentId = nil
	}
	if !mask.Selectors {
		out.Selectors = nil
	}
	if !mask.X509SvidTtl {
		out.X509SvidTtl = 0
	}
	if !mask.FederatesWith {
		out.FederatesWith = nil
	}
	if !mask.Admin {
		out.Admin = false
	}
	if !mask.Downstream {
		out.Downstream = false
	}
	if !mask.ExpiresAt {
		out.ExpiresAt = 0
	}
	if !mask.DnsNames {
		out.DnsNames = nil
	}
	if !mask.RevisionNumber {
		out.RevisionNumber = 0
	}
	if !mask.StoreSvid {
		out.StoreSvid = false
	}
	if !mask.JwtSvidTtl {
		out.JwtSvidTtl = 0
	}
	if !mask.Hint {
		out.Hint = ""
	}
	if !mask.CreatedAt {
		out.CreatedAt = 0
	}
	return out
}

func cloneSelectors(in []*types.Selector) []*types.Selector {
	out := make([]*types.Selector, 0, len(in))
	for _, s := range in {
		out = append(out, proto.CloneOf(s))
	}
	return out
}

func itemStatus(code codes.Code, format string, args ...any) *types.Status {
	return &types.Status{Code: int32(code), Message: fmt.Sprintf(format, args...)}
}

// parseToken decodes "<page index>:<last seq>"; the empty token is page 0.
// Carrying the page index lets FailListAfterPages target a page.
func parseToken(token string) (page int, after uint64, err error) {
	if token == "" {
		return 0, 0, nil
	}
	p, a, ok := strings.Cut(token, ":")
	if !ok {
		return 0, 0, fmt.Errorf("malformed token %q", token)
	}
	if page, err = strconv.Atoi(p); err != nil {
		return 0, 0, err
	}
	if after, err = strconv.ParseUint(a, 10, 64); err != nil {
		return 0, 0, err
	}
	return page, after, nil
}
