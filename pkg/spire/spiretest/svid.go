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
	"crypto"
	"crypto/x509"
	"time"

	bundlev1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/bundle/v1"
	svidv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/svid/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// svidService implements the svid.v1 API's NewDownstreamX509CA over the
// Server's roots.
type svidService struct {
	svidv1.UnimplementedSVIDServer
	s *Server
}

// DenyDownstream makes NewDownstreamX509CA refuse every caller as SPIRE
// refuses one whose registration entry is not marked downstream: the
// authorization middleware's PERMISSION_DENIED, with its message. By
// default the fake treats every caller as downstream.
func (s *Server) DenyDownstream(deny bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denyDownstream = deny
}

// TamperDownstream makes the fake pass each NewDownstreamX509CA response,
// with the public key of the request's CSR, through fn before sending it,
// so tests can make it return what a faulty server would. fn runs with the server locked
// and must not call its methods. nil stops it.
func (s *Server) TamperDownstream(fn func(pub crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tamperDownstream = fn
}

// NewDownstreamX509CA signs a CA certificate for the CSR's key with the
// active root and returns it with every root of the bundle. Refusals
// carry SPIRE v1.15's codes and messages: the authorization middleware's
// PERMISSION_DENIED for a caller that is not downstream, and
// INVALID_ARGUMENT for a CSR that does not parse or whose signature does
// not verify.
func (ss *svidService) NewDownstreamX509CA(_ context.Context, req *svidv1.NewDownstreamX509CARequest) (*svidv1.NewDownstreamX509CAResponse, error) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.denyDownstream {
		return nil, status.Errorf(codes.PermissionDenied, "authorization denied for method %s", svidv1.SVID_NewDownstreamX509CA_FullMethodName)
	}
	csr, err := x509.ParseCertificateRequest(req.Csr)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "malformed CSR: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "invalid CSR signature: %v", err)
	}
	ca, err := s.signDownstreamCA(csr.PublicKey, time.Duration(req.PreferredTtl)*time.Second)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to sign downstream X.509 CA: %v", err)
	}
	resp := &svidv1.NewDownstreamX509CAResponse{CaCertChain: [][]byte{ca.Raw}}
	for _, r := range s.roots {
		resp.X509Authorities = append(resp.X509Authorities, r.cert.Raw)
	}
	if s.tamperDownstream != nil {
		s.tamperDownstream(csr.PublicKey, resp)
	}
	return resp, nil
}

// bundleService implements the bundle.v1 API's GetBundle over the
// Server's roots.
type bundleService struct {
	bundlev1.UnimplementedBundleServer
	s *Server
}

// GetBundle returns the fake's own trust domain bundle: its roots as X.509
// authorities, tainted ones marked, unless the output mask leaves them out.
func (bs *bundleService) GetBundle(_ context.Context, req *bundlev1.GetBundleRequest) (*types.Bundle, error) {
	s := bs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.activeRoot(); err != nil {
		return nil, status.Errorf(codes.Internal, "spiretest: %v", err)
	}
	bundle := &types.Bundle{TrustDomain: s.trustDomain.Name()}
	if req.OutputMask == nil || req.OutputMask.X509Authorities {
		for _, r := range s.roots {
			bundle.X509Authorities = append(bundle.X509Authorities, &types.X509Certificate{Asn1: r.cert.Raw, Tainted: r.tainted})
		}
	}
	return bundle, nil
}
