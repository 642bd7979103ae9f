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

package webhook

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// CertificateTTL is the lifetime asked of SPIRE for the serving certificate, as
// spire-controller-manager asks.
const CertificateTTL = 24 * time.Hour

// Minter is the part of SPIRE's API the serving certificate comes from.
type Minter interface {
	MintX509SVID(ctx context.Context, key crypto.Signer, id *url.URL, dnsNames []string, ttl time.Duration) (*spire.X509SVID, error)
	X509Authorities(ctx context.Context) ([]*x509.Certificate, error)
}

// servingCertificate is the webhook's TLS certificate, minted by SPIRE for the DNS names of
// the webhook's Services and replaced before it expires. It is kept in memory only: every
// replica mints its own, so none ever serves an expired one (spire-controller-manager's
// standby replicas did, its issue #450).
type servingCertificate struct {
	minter Minter
	id     *url.URL
	now    func() time.Time

	mu        sync.RWMutex
	current   *tls.Certificate
	dnsNames  []string
	mintedAt  time.Time
	expiresAt time.Time
}

// get is tls.Config.GetCertificate.
func (c *servingCertificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.current == nil {
		return nil, errors.New("no serving certificate minted yet")
	}
	return c.current, nil
}

// rotateIfNeeded mints a new certificate when there is none, the names changed, or the
// current one is past the point where rotation is due. It returns why it minted, or "".
func (c *servingCertificate) rotateIfNeeded(ctx context.Context, dnsNames []string) (string, error) {
	c.mu.RLock()
	reason := rotationReason(c.current != nil, c.dnsNames, dnsNames, c.mintedAt, c.expiresAt, c.now())
	c.mu.RUnlock()
	if reason == "" {
		return "", nil
	}
	if err := c.mint(ctx, dnsNames); err != nil {
		return reason, err
	}
	return reason, nil
}

func (c *servingCertificate) mint(ctx context.Context, dnsNames []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate serving key: %w", err)
	}
	svid, err := c.minter.MintX509SVID(ctx, key, c.id, dnsNames, CertificateTTL)
	if err != nil {
		return err
	}
	cert := &tls.Certificate{PrivateKey: key, Leaf: svid.Chain[0]}
	for _, link := range svid.Chain {
		cert.Certificate = append(cert.Certificate, link.Raw)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current = cert
	c.dnsNames = slices.Clone(dnsNames)
	c.mintedAt = c.now()
	c.expiresAt = svid.ExpiresAt
	return nil
}

// rotationReason says why a certificate must be minted now, or "" if the current one serves.
func rotationReason(have bool, haveNames, wantNames []string, mintedAt, expiresAt, now time.Time) string {
	switch {
	case !have:
		return "no certificate yet"
	case !now.Before(expiresAt):
		return "expired"
	case !now.Before(renewAt(mintedAt, expiresAt)):
		return "expires soon"
	case !slices.Equal(haveNames, wantNames):
		return "webhook service names changed"
	}
	return ""
}

// renewAt is when a certificate valid from mintedAt to expiresAt is replaced: at half its
// lifetime, so that a SPIRE outage of up to half a lifetime (12 hours with CertificateTTL)
// never lets it expire.
func renewAt(mintedAt, expiresAt time.Time) time.Time {
	return mintedAt.Add(expiresAt.Sub(mintedAt) / 2)
}
