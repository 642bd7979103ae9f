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

// Package spiretest provides an in-process fake of the SPIRE server's admin
// API (entry and trust domain services) for unit tests. It serves real gRPC
// on a unix socket, mirrors the server behaviour controllers depend on
// (pagination, per-item statuses, duplicate detection, input masks), counts
// calls per method and can inject failures. It also signs downstream CAs
// (the SVID service's NewDownstreamX509CA) and serves its own bundle (the
// Bundle service's GetBundle) from self-signed roots it generates.
package spiretest

import (
	"context"
	"crypto"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	bundlev1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/bundle/v1"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	svidv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/svid/v1"
	trustdomainv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/trustdomain/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Method names accepted by Calls and FailNext: the gRPC method names of the
// services the fake implements.
const (
	MethodListEntries                       = "ListEntries"
	MethodGetEntry                          = "GetEntry"
	MethodBatchCreateEntry                  = "BatchCreateEntry"
	MethodBatchUpdateEntry                  = "BatchUpdateEntry"
	MethodBatchDeleteEntry                  = "BatchDeleteEntry"
	MethodListFederationRelationships       = "ListFederationRelationships"
	MethodGetFederationRelationship         = "GetFederationRelationship"
	MethodBatchCreateFederationRelationship = "BatchCreateFederationRelationship"
	MethodBatchUpdateFederationRelationship = "BatchUpdateFederationRelationship"
	MethodBatchDeleteFederationRelationship = "BatchDeleteFederationRelationship"
	MethodNewDownstreamX509CA               = "NewDownstreamX509CA"
	MethodGetBundle                         = "GetBundle"
)

// writeMethods are the calls that can change server state.
var writeMethods = []string{
	MethodBatchCreateEntry, MethodBatchUpdateEntry, MethodBatchDeleteEntry,
	MethodBatchCreateFederationRelationship, MethodBatchUpdateFederationRelationship, MethodBatchDeleteFederationRelationship,
}

// DefaultTrustDomain is the fake server's own trust domain unless
// SetTrustDomain changes it.
const DefaultTrustDomain = "example.org"

// Server is a fake SPIRE server. All methods are safe for concurrent use.
type Server struct {
	t          testing.TB
	socketPath string

	mu          sync.Mutex
	grpcServer  *grpc.Server
	trustDomain spiffeid.TrustDomain
	seq         uint64 // creation order, which is SPIRE's list order
	entries     map[string]*storedEntry
	rels        map[string]*storedRelationship
	// bundles holds the trust domain IDs ("spiffe://td") with a known
	// bundle; consulted only when requireBundles is set.
	bundles        map[string]bool
	requireBundles bool

	// roots are the trust domain's X.509 authorities, oldest first; the
	// last one signs. Created on first use (see activeRoot).
	roots            []*authority
	caTTL            time.Duration
	denyDownstream   bool
	tamperDownstream func(pub crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse)

	calls         map[string]int
	faults        map[string]*fault
	failListAfter int // page index whose ListEntries call fails; -1: off
}

type storedEntry struct {
	seq   uint64
	entry *types.Entry
}

type storedRelationship struct {
	seq uint64
	rel *types.FederationRelationship
}

type fault struct {
	n    int
	code codes.Code
}

// New starts a fake server on a unix socket in a temporary directory and
// stops it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := NewUnstarted(t)
	s.Start()
	return s
}

// NewUnstarted returns a fake server that has chosen its socket path but is
// not listening, so tests can dial before the server "comes up". Call Start.
func NewUnstarted(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		t:             t,
		socketPath:    socketPath(t),
		trustDomain:   spiffeid.RequireTrustDomainFromString(DefaultTrustDomain),
		entries:       map[string]*storedEntry{},
		rels:          map[string]*storedRelationship{},
		bundles:       map[string]bool{},
		calls:         map[string]int{},
		faults:        map[string]*fault{},
		failListAfter: -1,
		caTTL:         DefaultCATTL,
	}
	t.Cleanup(s.Stop)
	return s
}

// socketPath picks a socket path short enough for sun_path (104 bytes on
// some systems); long test names can push t.TempDir past it.
func socketPath(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "api.sock")
	if len(p) < 100 {
		return p
	}
	dir, err := os.MkdirTemp("", "spiretest")
	if err != nil {
		t.Fatalf("create socket directory: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "api.sock")
}

// Start listens on SocketPath and serves until Stop. State (entries,
// relationships, counters) survives a Stop/Start cycle, as SPIRE's
// datastore survives a restart.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grpcServer != nil {
		s.t.Fatalf("spiretest: server already started")
	}
	lis, err := net.Listen("unix", s.socketPath)
	if err != nil {
		s.t.Fatalf("spiretest: listen on %s: %v", s.socketPath, err)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(s.intercept))
	entryv1.RegisterEntryServer(gs, &entryService{s: s})
	trustdomainv1.RegisterTrustDomainServer(gs, &trustDomainService{s: s})
	svidv1.RegisterSVIDServer(gs, &svidService{s: s})
	bundlev1.RegisterBundleServer(gs, &bundleService{s: s})
	s.grpcServer = gs
	go func() { _ = gs.Serve(lis) }()
}

// Stop stops serving and removes the socket; calls then fail with
// UNAVAILABLE. It is a no-op when the server is not running.
func (s *Server) Stop() {
	s.mu.Lock()
	gs := s.grpcServer
	s.grpcServer = nil
	s.mu.Unlock()
	if gs != nil {
		gs.Stop()
	}
}

// SocketPath is the unix socket the server listens on.
func (s *Server) SocketPath() string { return s.socketPath }

// SetTrustDomain changes the server's own trust domain, which entries'
// SPIFFE and parent IDs must belong to (as in SPIRE). The roots of the old
// trust domain are dropped; the new one gets its own on first use.
func (s *Server) SetTrustDomain(td string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trustDomain = spiffeid.RequireTrustDomainFromString(td)
	s.roots = nil
}

// RequireFederatedBundles makes entry writes fail, as SPIRE does, when
// federates_with names a trust domain whose bundle the server lacks. Off by
// default; bundles come from SetBundles or from a relationship written with
// a trust_domain_bundle.
func (s *Server) RequireFederatedBundles(require bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requireBundles = require
}

// SetBundles marks the given trust domains as having a federated bundle.
func (s *Server) SetBundles(trustDomains ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range trustDomains {
		s.bundles[spiffeid.RequireTrustDomainFromString(name).IDString()] = true
	}
}

// Calls returns how many calls of method (e.g. MethodListEntries) reached
// the server, including ones that failed by injection.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// WriteCalls returns how many calls of any Batch* (write) method reached
// the server.
func (s *Server) WriteCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range writeMethods {
		n += s.calls[m]
	}
	return n
}

// ResetCalls zeroes every call counter.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.calls)
}

// FailNext makes the next n calls of method fail with code before they
// touch any state. n <= 0 clears the fault.
func (s *Server) FailNext(method string, n int, code codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= 0 {
		delete(s.faults, method)
		return
	}
	s.faults[method] = &fault{n: n, code: code}
}

// FailListAfterPages makes the next entry listing break after k pages were
// served: the ListEntries call for page k+1 (counted from the first,
// token-less call) fails with UNAVAILABLE. It fires once; k < 0 clears it.
func (s *Server) FailListAfterPages(k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failListAfter = max(k, -1)
}

// Entries returns a deep copy of the stored entries sorted by ID.
func (s *Server) Entries() []*types.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*types.Entry, 0, len(s.entries))
	for _, se := range s.entries {
		out = append(out, proto.CloneOf(se.entry))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return out
}

// SetEntries replaces all stored entries with copies of entries, without
// validating them. Missing IDs and creation times are filled in; revision
// numbers are kept.
func (s *Server) SetEntries(entries ...*types.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.entries)
	for _, e := range entries {
		e = proto.CloneOf(e)
		if e.Id == "" {
			e.Id = newID()
		}
		if e.CreatedAt == 0 {
			e.CreatedAt = time.Now().Unix()
		}
		s.seq++
		s.entries[e.Id] = &storedEntry{seq: s.seq, entry: e}
	}
}

// Relationships returns a deep copy of the stored federation relationships
// sorted by trust domain.
func (s *Server) Relationships() []*types.FederationRelationship {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*types.FederationRelationship, 0, len(s.rels))
	for _, sr := range s.rels {
		out = append(out, proto.CloneOf(sr.rel))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetTrustDomain() < out[j].GetTrustDomain() })
	return out
}

// SetRelationships replaces all stored federation relationships with copies
// of rels, without validating them.
func (s *Server) SetRelationships(rels ...*types.FederationRelationship) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.rels)
	for _, r := range rels {
		s.seq++
		s.rels[r.GetTrustDomain()] = &storedRelationship{seq: s.seq, rel: proto.CloneOf(r)}
	}
}

// intercept counts every call and applies FailNext faults.
func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := path.Base(info.FullMethod)
	s.mu.Lock()
	s.calls[method]++
	if f := s.faults[method]; f != nil {
		f.n--
		if f.n <= 0 {
			delete(s.faults, method)
		}
		s.mu.Unlock()
		return nil, status.Errorf(f.code, "spiretest: injected %s failure", method)
	}
	s.mu.Unlock()
	return handler(ctx, req)
}

// newID returns a random UUIDv4-formatted ID, like SPIRE's generated IDs.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
