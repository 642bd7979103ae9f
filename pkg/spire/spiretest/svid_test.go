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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"testing"
	"time"

	bundlev1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/bundle/v1"
	svidv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/svid/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func dialAuthority(t *testing.T, s *Server) (svidv1.SVIDClient, bundlev1.BundleClient) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+s.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return svidv1.NewSVIDClient(conn), bundlev1.NewBundleClient(conn)
}

func newCSR(t *testing.T) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return csr, key
}

func TestNewDownstreamX509CA(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		setCATTL  time.Duration
		preferred int32
		want      time.Duration // from now, before the cushion
	}{
		{name: "default", want: DefaultCATTL},
		{name: "set CA TTL", setCATTL: 2 * time.Hour, want: 2 * time.Hour},
		{name: "preferred TTL wins", setCATTL: 2 * time.Hour, preferred: 3600, want: time.Hour},
		{name: "cut at the root's expiry", preferred: 60 * 24 * 3600, want: rootTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t)
			s.SetCATTL(tc.setCATTL)
			svids, _ := dialAuthority(t, s)
			csr, key := newCSR(t)
			now := time.Now()
			resp, err := svids.NewDownstreamX509CA(ctx, &svidv1.NewDownstreamX509CARequest{Csr: csr, PreferredTtl: tc.preferred})
			if err != nil {
				t.Fatalf("NewDownstreamX509CA: %v", err)
			}
			if len(resp.CaCertChain) != 1 || len(resp.X509Authorities) != 1 {
				t.Fatalf("got %d CA certificates and %d authorities, want 1 and 1", len(resp.CaCertChain), len(resp.X509Authorities))
			}
			ca, err := x509.ParseCertificate(resp.CaCertChain[0])
			if err != nil {
				t.Fatal(err)
			}
			root, err := x509.ParseCertificate(resp.X509Authorities[0])
			if err != nil {
				t.Fatal(err)
			}
			if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 || !key.PublicKey.Equal(ca.PublicKey) {
				t.Errorf("CA: IsCA %v, key usage %b, for the CSR's key %v", ca.IsCA, ca.KeyUsage, key.PublicKey.Equal(ca.PublicKey))
			}
			if len(ca.URIs) != 1 || ca.URIs[0].String() != "spiffe://"+DefaultTrustDomain {
				t.Errorf("CA URIs = %v, want the trust domain's ID", ca.URIs)
			}
			pool := x509.NewCertPool()
			pool.AddCert(root)
			if _, err := ca.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
				t.Errorf("CA does not verify against the authority: %v", err)
			}
			if want := now.Add(tc.want); ca.NotAfter.Before(want.Add(-2*time.Second)) || ca.NotAfter.After(want.Add(2*time.Second)) {
				t.Errorf("NotAfter = %v, want about %v", ca.NotAfter, want)
			}
			if want := now.Add(-notBeforeCushion); ca.NotBefore.Before(want.Add(-2*time.Second)) || ca.NotBefore.After(want.Add(time.Second)) {
				t.Errorf("NotBefore = %v, want about %v", ca.NotBefore, want)
			}
			if n := s.Calls(MethodNewDownstreamX509CA); n != 1 {
				t.Errorf("calls = %d, want 1", n)
			}
		})
	}
}

func TestNewDownstreamX509CARefusals(t *testing.T) {
	ctx := context.Background()
	csr, _ := newCSR(t)
	badSignature := append([]byte(nil), csr...)
	badSignature[len(badSignature)-1] ^= 0xff
	for _, tc := range []struct {
		name     string
		deny     bool
		csr      []byte
		wantCode codes.Code
		wantMsg  string
	}{
		{
			name: "not downstream", deny: true, csr: csr, wantCode: codes.PermissionDenied,
			wantMsg: "authorization denied for method /spire.api.server.svid.v1.SVID/NewDownstreamX509CA",
		},
		{name: "malformed CSR", csr: []byte("garbage"), wantCode: codes.InvalidArgument},
		{name: "bad CSR signature", csr: badSignature, wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t)
			s.DenyDownstream(tc.deny)
			svids, _ := dialAuthority(t, s)
			_, err := svids.NewDownstreamX509CA(ctx, &svidv1.NewDownstreamX509CARequest{Csr: tc.csr})
			st := status.Convert(err)
			if st.Code() != tc.wantCode {
				t.Errorf("code = %s, want %s (err %v)", st.Code(), tc.wantCode, err)
			}
			if tc.wantMsg != "" && st.Message() != tc.wantMsg {
				t.Errorf("message = %q, want %q", st.Message(), tc.wantMsg)
			}
		})
	}
}

func TestGetBundle(t *testing.T) {
	ctx := context.Background()
	s := New(t)
	_, bundles := dialAuthority(t, s)
	s.RotateX509Authority()
	roots := s.X509Authorities()
	if len(roots) != 2 {
		t.Fatalf("after one rotation the fake has %d roots, want 2", len(roots))
	}
	b, err := bundles.GetBundle(ctx, &bundlev1.GetBundleRequest{})
	if err != nil {
		t.Fatalf("GetBundle: %v", err)
	}
	if b.TrustDomain != DefaultTrustDomain || len(b.X509Authorities) != 2 {
		t.Fatalf("bundle of %q with %d authorities, want %q with 2", b.TrustDomain, len(b.X509Authorities), DefaultTrustDomain)
	}
	for i, a := range b.X509Authorities {
		if string(a.Asn1) != string(roots[i].Raw) {
			t.Errorf("authority %d differs from root %d", i, i)
		}
	}
	masked, err := bundles.GetBundle(ctx, &bundlev1.GetBundleRequest{OutputMask: &types.BundleMask{}})
	if err != nil {
		t.Fatalf("GetBundle with a mask: %v", err)
	}
	if len(masked.X509Authorities) != 0 {
		t.Errorf("a mask without X.509 authorities returned %d", len(masked.X509Authorities))
	}
	if n := s.Calls(MethodGetBundle); n != 2 {
		t.Errorf("calls = %d, want 2", n)
	}
}

// TestTaintX509Authority: a tainted root is still served, marked tainted; the others are not.
func TestTaintX509Authority(t *testing.T) {
	s := New(t)
	_, bundles := dialAuthority(t, s)
	s.RotateX509Authority()
	roots := s.X509Authorities()
	s.TaintX509Authority(roots[0])
	b, err := bundles.GetBundle(context.Background(), &bundlev1.GetBundleRequest{})
	if err != nil {
		t.Fatalf("GetBundle: %v", err)
	}
	if len(b.X509Authorities) != 2 {
		t.Fatalf("bundle has %d authorities, want 2", len(b.X509Authorities))
	}
	if !b.X509Authorities[0].Tainted || b.X509Authorities[1].Tainted {
		t.Errorf("tainted = [%v %v], want [true false]: only the old root is tainted",
			b.X509Authorities[0].Tainted, b.X509Authorities[1].Tainted)
	}
}

func TestSetTrustDomainReplacesRoots(t *testing.T) {
	s := New(t)
	old := s.X509Authorities()
	s.SetTrustDomain("other.org")
	roots := s.X509Authorities()
	if len(roots) != 1 || roots[0].Equal(old[0]) {
		t.Fatal("the new trust domain kept the old root")
	}
	if len(roots[0].URIs) != 1 || roots[0].URIs[0].String() != "spiffe://other.org" {
		t.Errorf("root URIs = %v, want spiffe://other.org", roots[0].URIs)
	}
}
