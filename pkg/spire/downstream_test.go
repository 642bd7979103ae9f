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
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	svidv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/svid/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

func TestNewDownstreamX509CA(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		caTTL   time.Duration // the fake's own CA TTL; 0 keeps its default
		ttl     time.Duration
		wantTTL time.Duration
	}{
		{name: "preferred TTL", ttl: 2 * time.Hour, wantTTL: 2 * time.Hour},
		{name: "SPIRE chooses", caTTL: 3 * time.Hour, wantTTL: 3 * time.Hour},
		{name: "SPIRE's default", wantTTL: spiretest.DefaultCATTL},
		{name: "sub-second TTL rounds down to SPIRE's choice", caTTL: 5 * time.Hour, ttl: time.Millisecond, wantTTL: 5 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := spiretest.New(t)
			srv.SetCATTL(tc.caTTL)
			before := time.Now()
			ca, err := newClient(t, srv).Authority().NewDownstreamX509CA(ctx, tc.ttl)
			if err != nil {
				t.Fatalf("NewDownstreamX509CA: %v", err)
			}
			if len(ca.Chain) != 1 {
				t.Fatalf("chain has %d certificates, want the CA alone", len(ca.Chain))
			}
			cert := ca.Chain[0]
			if !cert.IsCA {
				t.Error("the CA certificate is not a CA")
			}
			if !ca.Key.Public().(*ecdsa.PublicKey).Equal(cert.PublicKey) {
				t.Error("the CA certificate is not for the CA's key")
			}
			if k := ca.Key.Public().(*ecdsa.PublicKey); k.Curve != elliptic.P256() {
				t.Errorf("key curve = %s, want P-256", k.Curve.Params().Name)
			}
			want := before.Add(tc.wantTTL)
			if got := ca.NotAfter(); got.Before(want.Add(-2*time.Second)) || got.After(want.Add(2*time.Second)) {
				t.Errorf("NotAfter = %v, want about %v", got, want)
			}
			if mid := cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 2); !ca.RenewAt().Equal(mid) {
				t.Errorf("RenewAt = %v, want the middle of the validity %v", ca.RenewAt(), mid)
			}
			roots := srv.X509Authorities()
			if len(ca.Authorities) != 1 || !ca.Authorities[0].Equal(roots[0]) {
				t.Errorf("Authorities = %d certificates, want the fake's root", len(ca.Authorities))
			}
			if n := srv.Calls(spiretest.MethodNewDownstreamX509CA); n != 1 {
				t.Errorf("NewDownstreamX509CA calls = %d, want 1", n)
			}
		})
	}
}

func TestNewDownstreamX509CAAfterRotation(t *testing.T) {
	ctx := context.Background()
	srv := spiretest.New(t)
	authority := newClient(t, srv).Authority()
	first, err := authority.NewDownstreamX509CA(ctx, time.Hour)
	if err != nil {
		t.Fatalf("NewDownstreamX509CA: %v", err)
	}
	srv.RotateX509Authority()
	second, err := authority.NewDownstreamX509CA(ctx, time.Hour)
	if err != nil {
		t.Fatalf("NewDownstreamX509CA after rotation: %v", err)
	}
	roots := srv.X509Authorities()
	if len(second.Authorities) != 2 {
		t.Fatalf("after rotation SPIRE returned %d authorities, want the old and the new", len(second.Authorities))
	}
	if err := second.Chain[0].CheckSignatureFrom(roots[1]); err != nil {
		t.Errorf("the new CA is not signed by the new root: %v", err)
	}
	if err := first.Chain[0].CheckSignatureFrom(roots[0]); err != nil {
		t.Errorf("the first CA is not signed by the first root: %v", err)
	}
	got, err := authority.X509Authorities(ctx)
	if err != nil {
		t.Fatalf("X509Authorities: %v", err)
	}
	if len(got) != 2 || !got[0].Equal(roots[0]) || !got[1].Equal(roots[1]) {
		t.Errorf("X509Authorities returned %d certificates, want both roots", len(got))
	}
}

func TestNewDownstreamX509CANotDownstream(t *testing.T) {
	srv := spiretest.New(t)
	srv.DenyDownstream(true)
	_, err := newClient(t, srv).Authority().NewDownstreamX509CA(context.Background(), time.Hour)
	if !errors.Is(err, ErrNotDownstream) {
		t.Fatalf("err = %v, want ErrNotDownstream", err)
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("code = %s, want SPIRE's PermissionDenied kept", status.Code(err))
	}
	if Unreachable(err) {
		t.Error("a refusal counts as unreachable")
	}
	for _, fix := range []string{"downstream: true", "-downstream", "over TCP"} {
		if !strings.Contains(err.Error(), fix) {
			t.Errorf("error %q does not name the fix %q", err, fix)
		}
	}
}

func TestNewDownstreamX509CAUnreachable(t *testing.T) {
	ctx := context.Background()
	srv := spiretest.New(t)
	authority := newClient(t, srv).Authority()

	srv.FailNext(spiretest.MethodNewDownstreamX509CA, 1, codes.Unavailable)
	_, err := authority.NewDownstreamX509CA(ctx, time.Hour)
	if !Unreachable(err) || errors.Is(err, ErrNotDownstream) {
		t.Errorf("UNAVAILABLE: err = %v, Unreachable = %v, want unreachable and not ErrNotDownstream", err, Unreachable(err))
	}

	srv.Stop()
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := authority.NewDownstreamX509CA(ctx, time.Hour); !Unreachable(err) {
		t.Errorf("server down: err = %v, want unreachable", err)
	}
}

func TestNotDownstream(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"middleware refusal", status.Error(codes.PermissionDenied, "authorization denied for method "+svidv1.SVID_NewDownstreamX509CA_FullMethodName), true},
		{"custom policy's refusal", status.Error(codes.PermissionDenied, "denied"), true},
		{"handler refusal", status.Error(codes.Internal, "caller is not a downstream workload"), true},
		{"other internal error", status.Error(codes.Internal, "failed to sign downstream X.509 CA: boom"), false},
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), false},
		{"rate limited", status.Error(codes.ResourceExhausted, "rejecting request due to downstream CA signing rate limit"), false},
		{"not a status", errors.New("permission denied"), false},
	} {
		if got := notDownstream(tc.err); got != tc.want {
			t.Errorf("%s: notDownstream(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestNewDownstreamX509CAChecksWhatSPIREReturns(t *testing.T) {
	root, rootKey := testCert(t, nil, nil, nil, true)
	intermediate, intermediateKey := testCert(t, root, rootKey, nil, true)
	stranger, _ := testCert(t, nil, nil, nil, true)
	for _, tc := range []struct {
		name      string
		tamper    func(t *testing.T, pub crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse)
		wantErr   string
		wantChain int // certificates in the returned chain when no error is wanted
	}{
		{
			name: "an intermediate is kept and the root dropped",
			tamper: func(t *testing.T, pub crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				ca, _ := testCert(t, intermediate, intermediateKey, pub, true)
				resp.CaCertChain = [][]byte{ca.Raw, intermediate.Raw, root.Raw}
				resp.X509Authorities = [][]byte{root.Raw}
			},
			wantChain: 2,
		},
		{
			name: "no CA",
			tamper: func(_ *testing.T, _ crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				resp.CaCertChain = nil
			},
			wantErr: "no CA certificate",
		},
		{
			name: "no authority",
			tamper: func(_ *testing.T, _ crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				resp.X509Authorities = nil
			},
			wantErr: "no X.509 authority",
		},
		{
			name: "CA does not parse",
			tamper: func(_ *testing.T, _ crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				resp.CaCertChain[0] = []byte("garbage")
			},
			wantErr: "CA chain certificate 0",
		},
		{
			name: "authority does not parse",
			tamper: func(_ *testing.T, _ crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				resp.X509Authorities = append(resp.X509Authorities, []byte("garbage"))
			},
			wantErr: "X.509 authority certificate 1",
		},
		{
			name: "CA for another key",
			tamper: func(t *testing.T, _ crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				ca, _ := testCert(t, root, rootKey, nil, true)
				resp.CaCertChain = [][]byte{ca.Raw}
				resp.X509Authorities = [][]byte{root.Raw}
			},
			wantErr: "not for the key",
		},
		{
			name: "not a CA",
			tamper: func(t *testing.T, pub crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				leaf, _ := testCert(t, root, rootKey, pub, false)
				resp.CaCertChain = [][]byte{leaf.Raw}
				resp.X509Authorities = [][]byte{root.Raw}
			},
			wantErr: "not a CA",
		},
		{
			name: "does not chain to the authorities",
			tamper: func(_ *testing.T, _ crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				resp.X509Authorities = [][]byte{stranger.Raw}
			},
			wantErr: "does not chain",
		},
		{
			name: "intermediate missing",
			tamper: func(t *testing.T, pub crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				ca, _ := testCert(t, intermediate, intermediateKey, pub, true)
				resp.CaCertChain = [][]byte{ca.Raw}
				resp.X509Authorities = [][]byte{root.Raw}
			},
			wantErr: "does not chain",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := spiretest.New(t)
			srv.TamperDownstream(func(pub crypto.PublicKey, resp *svidv1.NewDownstreamX509CAResponse) {
				tc.tamper(t, pub, resp)
			})
			ca, err := newClient(t, srv).Authority().NewDownstreamX509CA(context.Background(), time.Hour)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if errors.Is(err, ErrNotDownstream) || Unreachable(err) {
					t.Errorf("err = %v is classified as not downstream or unreachable", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewDownstreamX509CA: %v", err)
			}
			if len(ca.Chain) != tc.wantChain {
				t.Errorf("chain has %d certificates, want %d", len(ca.Chain), tc.wantChain)
			}
			for _, c := range ca.Chain {
				if c.Equal(root) {
					t.Error("the chain holds the root")
				}
			}
		})
	}
}

// testCert returns a certificate for pub (a new P-256 key's when pub is nil, returned with
// it), signed by parent with parentKey, or self-signed when parent is nil. It reports
// failures with t.Errorf, so the fake's handler goroutine may call it too.
func testCert(t *testing.T, parent *x509.Certificate, parentKey crypto.Signer, pub crypto.PublicKey, isCA bool) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	cert, key, err := newTestCert(parent, parentKey, pub, isCA)
	if err != nil {
		t.Errorf("test certificate: %v", err)
		return &x509.Certificate{}, nil
	}
	return cert, key
}

func newTestCert(parent *x509.Certificate, parentKey crypto.Signer, pub crypto.PublicKey, isCA bool) (*x509.Certificate, crypto.Signer, error) {
	var key crypto.Signer
	if pub == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		key, pub = k, k.Public()
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "test " + serial.String()},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		KeyUsage:              x509.KeyUsageDigitalSignature,
	}
	if isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}
