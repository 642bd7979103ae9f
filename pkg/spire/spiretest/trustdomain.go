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

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	trustdomainv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/trustdomain/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// trustDomainService implements the trustdomain.v1 API over the Server's
// state.
type trustDomainService struct {
	trustdomainv1.UnimplementedTrustDomainServer
	s *Server
}

// ListFederationRelationships pages in creation order with the same token
// rules as ListEntries.
func (ts *trustDomainService) ListFederationRelationships(_ context.Context, req *trustdomainv1.ListFederationRelationshipsRequest) (*trustdomainv1.ListFederationRelationshipsResponse, error) {
	s := ts.s
	page, after, err := parseToken(req.PageToken)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "invalid page token: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := make([]*storedRelationship, 0, len(s.rels))
	for _, sr := range s.rels {
		if sr.seq > after {
			stored = append(stored, sr)
		}
	}
	sort.Slice(stored, func(i, j int) bool { return stored[i].seq < stored[j].seq })
	if req.PageSize > 0 && len(stored) > int(req.PageSize) {
		stored = stored[:req.PageSize]
	}
	resp := &trustdomainv1.ListFederationRelationshipsResponse{}
	for _, sr := range stored {
		resp.FederationRelationships = append(resp.FederationRelationships, maskRelationship(sr.rel, req.OutputMask))
	}
	if req.PageSize > 0 && len(stored) > 0 {
		resp.NextPageToken = fmt.Sprintf("%d:%d", page+1, stored[len(stored)-1].seq)
	}
	return resp, nil
}

// GetFederationRelationship returns one relationship by trust domain name.
func (ts *trustDomainService) GetFederationRelationship(_ context.Context, req *trustdomainv1.GetFederationRelationshipRequest) (*types.FederationRelationship, error) {
	s := ts.s
	td, err := spiffeid.TrustDomainFromString(req.TrustDomain)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "failed to parse trust domain: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.rels[td.Name()]
	if sr == nil {
		return nil, status.Error(codes.NotFound, "federation relationship does not exist")
	}
	return maskRelationship(sr.rel, req.OutputMask), nil
}

// BatchCreateFederationRelationship creates relationships in order. A
// relationship whose trust domain already has one fails with INTERNAL, not
// the ALREADY_EXISTS the proto documents, because that is what SPIRE v1.13
// returns (its service maps every datastore error to INTERNAL).
func (ts *trustDomainService) BatchCreateFederationRelationship(_ context.Context, req *trustdomainv1.BatchCreateFederationRelationshipRequest) (*trustdomainv1.BatchCreateFederationRelationshipResponse, error) {
	s := ts.s
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &trustdomainv1.BatchCreateFederationRelationshipResponse{}
	for _, in := range req.FederationRelationships {
		r := &trustdomainv1.BatchCreateFederationRelationshipResponse_Result{}
		td, err := checkRelationship(in)
		switch {
		case err != nil:
			r.Status = itemStatus(codes.InvalidArgument, "failed to convert federation relationship: %v", err)
		case td == s.trustDomain:
			r.Status = itemStatus(codes.InvalidArgument, "unable to create federation relationship for server trust domain")
		case s.rels[td.Name()] != nil:
			r.Status = itemStatus(codes.Internal, "failed to create federation relationship: datastore-sql: UNIQUE constraint failed: federated_trust_domains.trust_domain")
		default:
			rel := proto.CloneOf(in)
			rel.TrustDomain = td.Name()
			s.seq++
			s.rels[rel.TrustDomain] = &storedRelationship{seq: s.seq, rel: rel}
			if rel.TrustDomainBundle != nil {
				s.bundles[td.IDString()] = true
			}
			r.Status = itemStatus(codes.OK, "OK")
			r.FederationRelationship = maskRelationship(rel, req.OutputMask)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// BatchUpdateFederationRelationship writes the fields selected by the input
// mask (nil: all). As in SPIRE every field is validated whatever the mask,
// and a missing relationship fails with INTERNAL rather than NOT_FOUND.
func (ts *trustDomainService) BatchUpdateFederationRelationship(_ context.Context, req *trustdomainv1.BatchUpdateFederationRelationshipRequest) (*trustdomainv1.BatchUpdateFederationRelationshipResponse, error) {
	s := ts.s
	mask := req.InputMask
	if mask == nil {
		mask = &types.FederationRelationshipMask{BundleEndpointUrl: true, BundleEndpointProfile: true, TrustDomainBundle: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &trustdomainv1.BatchUpdateFederationRelationshipResponse{}
	for _, in := range req.FederationRelationships {
		r := &trustdomainv1.BatchUpdateFederationRelationshipResponse_Result{}
		td, err := checkRelationship(in)
		var sr *storedRelationship
		if err == nil {
			sr = s.rels[td.Name()]
		}
		switch {
		case err != nil:
			r.Status = itemStatus(codes.InvalidArgument, "failed to convert federation relationship: %v", err)
		case sr == nil:
			r.Status = itemStatus(codes.Internal, "failed to update federation relationship: unable to fetch federation relationship: record not found")
		default:
			rel := proto.CloneOf(sr.rel)
			if mask.BundleEndpointUrl {
				rel.BundleEndpointUrl = in.BundleEndpointUrl
			}
			if mask.BundleEndpointProfile {
				rel.BundleEndpointProfile = proto.CloneOf(in).BundleEndpointProfile
			}
			// SPIRE only ever sets the bundle here; a nil bundle keeps the
			// current one.
			if mask.TrustDomainBundle && in.TrustDomainBundle != nil {
				rel.TrustDomainBundle = proto.CloneOf(in.TrustDomainBundle)
				s.bundles[td.IDString()] = true
			}
			sr.rel = rel
			r.Status = itemStatus(codes.OK, "OK")
			r.FederationRelationship = maskRelationship(rel, req.OutputMask)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// BatchDeleteFederationRelationship deletes relationships by trust domain
// name, reporting NOT_FOUND per item.
func (ts *trustDomainService) BatchDeleteFederationRelationship(_ context.Context, req *trustdomainv1.BatchDeleteFederationRelationshipRequest) (*trustdomainv1.BatchDeleteFederationRelationshipResponse, error) {
	s := ts.s
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &trustdomainv1.BatchDeleteFederationRelationshipResponse{}
	for _, name := range req.TrustDomains {
		r := &trustdomainv1.BatchDeleteFederationRelationshipResponse_Result{TrustDomain: name}
		td, err := spiffeid.TrustDomainFromString(name)
		switch {
		case name == "":
			r.Status = itemStatus(codes.InvalidArgument, "missing trust domain")
		case err != nil:
			r.Status = itemStatus(codes.InvalidArgument, "failed to parse trust domain: %v", err)
		case s.rels[td.Name()] == nil:
			r.TrustDomain = td.Name()
			r.Status = itemStatus(codes.NotFound, "federation relationship not found")
		default:
			r.TrustDomain = td.Name()
			delete(s.rels, td.Name())
			r.Status = itemStatus(codes.OK, "OK")
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// maskRelationship returns a copy of r with the fields mask leaves out
// cleared; the trust domain is always kept.
func maskRelationship(r *types.FederationRelationship, mask *types.FederationRelationshipMask) *types.FederationRelationship {
	out := proto.CloneOf(r)
	if mask == nil {
		return out
	}
	if !mask.BundleEndpointUrl {
		out.BundleEndpointUrl = ""
	}
	if !mask.BundleEndpointProfile {
		out.BundleEndpointProfile = nil
	}
	if !mask.TrustDomainBundle {
		out.TrustDomainBundle = nil
	}
	return out
}
