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
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	bundlev1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/bundle/v1"
	svidv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/svid/v1"
	trustdomainv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/trustdomain/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
)

// X509SVID is a certificate chain minted by SPIRE for a key the caller holds.
type X509SVID struct {
	// Chain is the leaf first, then any intermediates.
	Chain     []*x509.Certificate
	ExpiresAt time.Time
}

// AuthorityClient mints X509-SVIDs and reads the server's X.509 authorities. It is what the
// admission webhook uses to get a serving certificate that the API server can verify with
// SPIRE's own trust bundle, as spire-controller-manager does.
type AuthorityClient struct {
	svids   svidv1.SVIDClient
	bundles bundlev1.BundleClient
	tds     trustdomainv1.TrustDomainClient
	// state is the connection's state, which WatchReconnects follows; nil when cc is not a
	// *grpc.ClientConn.
	state connectivityWatcher
}

// NewAuthorityClient returns a client over an existing connection to the SPIRE server API.
func NewAuthorityClient(cc grpc.ClientConnInterface) *AuthorityClient {
	state, _ := cc.(connectivityWatcher)
	return &AuthorityClient{svids: svidv1.NewSVIDClient(cc), bundles: bundlev1.NewBundleClient(cc), tds: trustdomainv1.NewTrustDomainClient(cc), state: state}
}

// MintX509SVID asks SPIRE to sign a certificate for key with the SPIFFE ID id and the DNS
// names given, valid for about ttl (SPIRE may shorten it to its CA's lifetime).
func (c *AuthorityClient) MintX509SVID(ctx context.Context, key crypto.Signer, id *url.URL, dnsNames []string, ttl time.Duration) (*X509SVID, error) {
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: firstOr(dnsNames, "")},
		URIs:     []*url.URL{id},
		DNSNames: dnsNames,
	}, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate request: %w", err)
	}
	start := time.Now()
	resp, err := c.svids.MintX509SVID(ctx, &svidv1.MintX509SVIDRequest{
		Csr: csr,
		Ttl: int32(min(ttl/time.Second, math.MaxInt32)),
	})
	logCall(ctx, "MintX509SVID", start, err)
	if err != nil {
		return nil, fmt.Errorf("mint X509-SVID for %s: %w", id, err)
	}
	svid := resp.GetSvid()
	if svid == nil || len(svid.GetCertChain()) == 0 {
		return nil, errors.New("mint X509-SVID: SPIRE returned no certificate")
	}
	out := &X509SVID{ExpiresAt: time.Unix(svid.GetExpiresAt(), 0)}
	for i, der := range svid.GetCertChain() {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("mint X509-SVID: certificate %d of the chain: %w", i, err)
		}
		out.Chain = append(out.Chain, cert)
	}
	return out, nil
}

// X509Authority is one of the trust domain's X.509 authorities: a root of every X509-SVID
// SPIRE mints. A tainted one is still trusted, but SPIRE is rotating its SVIDs away from it.
type X509Authority struct {
	Certificate *x509.Certificate
	Tainted     bool
}

// BundleX509Authorities returns the server's own trust domain's X.509 authorities, tainted
// ones marked.
func (c *AuthorityClient) BundleX509Authorities(ctx context.Context) ([]X509Authority, error) {
	start := time.Now()
	bundle, err := c.bundles.GetBundle(ctx, &bundlev1.GetBundleRequest{
		OutputMask: &types.BundleMask{X509Authorities: true},
	})
	logCall(ctx, "GetBundle", start, err)
	if err != nil {
		return nil, fmt.Errorf("get trust bundle: %w", err)
	}
	var out []X509Authority
	for i, authority := range bundle.GetX509Authorities() {
		cert, err := x509.ParseCertificate(authority.GetAsn1())
		if err != nil {
			return nil, fmt.Errorf("get trust bundle: X.509 authority %d: %w", i, err)
		}
		out = append(out, X509Authority{Certificate: cert, Tainted: authority.GetTainted()})
	}
	if len(out) == 0 {
		return nil, errors.New("get trust bundle: SPIRE has no X.509 authority")
	}
	return out, nil
}

// X509Authorities returns the certificates of the server's own trust domain's X.509
// authorities: the CAs that sign every X509-SVID it mints.
func (c *AuthorityClient) X509Authorities(ctx context.Context) ([]*x509.Certificate, error) {
	authorities, err := c.BundleX509Authorities(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*x509.Certificate, len(authorities))
	for i, a := range authorities {
		out[i] = a.Certificate
	}
	return out, nil
}

func firstOr(values []string, fallback string) string {
	if len(values) == 0 {
		return fallback
	}
	return values[0]
}

// Authority returns a client for SVID minting and the trust bundle over c's connection.
func (c *Client) Authority() *AuthorityClient {
	return NewAuthorityClient(c.cc)
}
