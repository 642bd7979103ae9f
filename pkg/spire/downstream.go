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
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	svidv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/svid/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNotDownstream is wrapped by NewDownstreamX509CA's error when SPIRE refuses to sign a
// downstream CA because the caller is not a downstream workload. Its text names the fix.
//
// SPIRE v1.15 authorizes NewDownstreamX509CA only for a caller that holds an X509-SVID and
// whose registration entry has downstream set (pkg/server/authpolicy/policy_data.json:
// "allow_downstream"). The authorization middleware (pkg/server/api/middleware,
// authorization.go) refuses anyone else with PERMISSION_DENIED "authorization denied for
// method /spire.api.server.svid.v1.SVID/NewDownstreamX509CA"; a custom policy that lets the
// call through reaches the handler (pkg/server/api/svid/v1/service.go), which answers
// INTERNAL "caller is not a downstream workload". A caller on the local unix socket has no
// SPIFFE ID, so no entry can make it downstream.
var ErrNotDownstream = errors.New("not a downstream caller: SPIRE signs downstream CAs only for a caller whose registration entry is marked downstream; " +
	"mark the entry of this controller's SPIFFE ID downstream (downstream: true in its ClusterSPIFFEID or ClusterStaticEntry, " +
	"or spire-server entry update -entryID <id> -downstream with the entry's other flags restated) " +
	"and call SPIRE over TCP with that SPIFFE ID's X509-SVID: a caller on the local socket has no SPIFFE ID")

// notDownstreamMessage is what SPIRE's SVID handler answers, with INTERNAL, to a caller the
// authorization policy let through without a downstream entry.
const notDownstreamMessage = "caller is not a downstream workload"

// DownstreamCA is an intermediate CA that SPIRE signed for a key the caller holds, with which
// the caller signs X509-SVIDs of SPIRE's trust domain itself.
type DownstreamCA struct {
	// Chain is the CA certificate SPIRE signed for Key, then the intermediates between it and
	// one of Authorities; never a root of Authorities.
	Chain []*x509.Certificate
	// Key is the CA's private key; it lives only in memory.
	Key crypto.Signer
	// Authorities are SPIRE's X.509 roots returned with the CA: what verifiers of what the CA
	// signs must trust.
	Authorities []*x509.Certificate
}

// NotAfter is when the CA certificate expires.
func (ca *DownstreamCA) NotAfter() time.Time {
	return ca.Chain[0].NotAfter
}

// RenewAt is half way through the CA certificate's validity: replacing it then leaves the
// other half for retries while SPIRE is unreachable.
func (ca *DownstreamCA) RenewAt() time.Time {
	cert := ca.Chain[0]
	return cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 2)
}

// NewDownstreamX509CA generates a P-256 key in memory and asks SPIRE to sign a CA certificate
// for it, valid for about ttl (0 lets SPIRE choose; SPIRE cuts it at its own CA's expiry). It
// checks that the certificate is a CA for that key and chains to the authorities SPIRE
// returned with it. A refusal because the caller is not downstream wraps ErrNotDownstream;
// other failures wrap SPIRE's status, so Unreachable classifies them as it does other calls.
func (c *AuthorityClient) NewDownstreamX509CA(ctx context.Context, ttl time.Duration) (*DownstreamCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new downstream X.509 CA: generate key: %w", err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, fmt.Errorf("new downstream X.509 CA: create certificate request: %w", err)
	}
	start := time.Now()
	resp, err := c.svids.NewDownstreamX509CA(ctx, &svidv1.NewDownstreamX509CARequest{
		Csr:          csr,
		PreferredTtl: int32(min(max(ttl/time.Second, 0), math.MaxInt32)),
	})
	logCall(ctx, "NewDownstreamX509CA", start, err)
	if err != nil {
		if notDownstream(err) {
			return nil, fmt.Errorf("new downstream X.509 CA: %w: %w", ErrNotDownstream, err)
		}
		return nil, fmt.Errorf("new downstream X.509 CA: %w", err)
	}
	ca, err := parseDownstreamCA(resp, key, time.Now())
	if err != nil {
		return nil, fmt.Errorf("new downstream X.509 CA: %w", err)
	}
	return ca, nil
}

// notDownstream reports whether err is SPIRE's refusal of a caller that is not downstream.
// Any PERMISSION_DENIED counts: SPIRE's policy authorizes this method for downstream callers
// only, so whatever the message, a downstream entry is what the caller lacks.
func notDownstream(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.PermissionDenied:
		return true
	case codes.Internal:
		return st.Message() == notDownstreamMessage
	}
	return false
}

// parseDownstreamCA parses SPIRE's answer and checks, at now, that its first certificate is a
// CA for key that chains to the authorities returned with it.
func parseDownstreamCA(resp *svidv1.NewDownstreamX509CAResponse, key crypto.Signer, now time.Time) (*DownstreamCA, error) {
	chain, err := parseCertificates("CA chain", resp.GetCaCertChain())
	if err != nil {
		return nil, err
	}
	if len(chain) == 0 {
		return nil, errors.New("SPIRE returned no CA certificate")
	}
	authorities, err := parseCertificates("X.509 authority", resp.GetX509Authorities())
	if err != nil {
		return nil, err
	}
	if len(authorities) == 0 {
		return nil, errors.New("SPIRE returned no X.509 authority")
	}
	ca := chain[0]
	pub, ok := ca.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("the CA certificate SPIRE returned is not for the key in the request")
	}
	if !ca.BasicConstraintsValid || !ca.IsCA {
		return nil, errors.New("the certificate SPIRE returned is not a CA (basic constraints cA is not set)")
	}
	if ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("the CA certificate SPIRE returned lacks the keyCertSign key usage")
	}
	chain = withoutRoots(chain, authorities)
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for _, a := range authorities {
		roots.AddCert(a)
	}
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := ca.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}); err != nil {
		return nil, fmt.Errorf("the CA certificate SPIRE returned does not chain to its X.509 authorities: %w", err)
	}
	return &DownstreamCA{Chain: chain, Key: key, Authorities: authorities}, nil
}

// withoutRoots returns chain without the certificates after the first that are among roots:
// verifiers hold the roots already, and a root sent in a chain is never trusted for being
// there.
func withoutRoots(chain, roots []*x509.Certificate) []*x509.Certificate {
	out := chain[:1:1]
	for _, c := range chain[1:] {
		if !slices.ContainsFunc(roots, c.Equal) {
			out = append(out, c)
		}
	}
	return out
}

func parseCertificates(what string, ders [][]byte) ([]*x509.Certificate, error) {
	out := make([]*x509.Certificate, 0, len(ders))
	for i, der := range ders {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%s certificate %d: %w", what, i, err)
		}
		out = append(out, cert)
	}
	return out, nil
}
