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

package federation

import (
	"bytes"
	"cmp"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// parseBundle reads a SPIFFE bundle document (a JWKS with SPIFFE extensions) and converts it
// to the form SPIRE's API takes: X.509 authorities as DER certificates, JWT authorities as
// PKIX DER public keys with their key IDs, the refresh hint in seconds and the sequence
// number. JWT authorities are sorted by key ID so the result is deterministic.
func parseBundle(td spiffeid.TrustDomain, doc string) (*spiretypes.Bundle, error) {
	b, err := spiffebundle.Parse(td, []byte(doc))
	if err != nil {
		return nil, err
	}
	out := &spiretypes.Bundle{TrustDomain: td.Name()}
	for _, cert := range b.X509Authorities() {
		out.X509Authorities = append(out.X509Authorities, &spiretypes.X509Certificate{Asn1: cert.Raw})
	}
	for keyID, key := range b.JWTAuthorities() {
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			return nil, fmt.Errorf("JWT authority %q: %w", keyID, err)
		}
		out.JwtAuthorities = append(out.JwtAuthorities, &spiretypes.JWTKey{KeyId: keyID, PublicKey: der})
	}
	slices.SortFunc(out.JwtAuthorities, func(a, b *spiretypes.JWTKey) int { return cmp.Compare(a.KeyId, b.KeyId) })
	if hint, ok := b.RefreshHint(); ok {
		out.RefreshHint = int64(hint / time.Second)
	}
	if seq, ok := b.SequenceNumber(); ok {
		out.SequenceNumber = seq
	}
	return out, nil
}

// bundleEqual reports whether SPIRE holding bundle a means it holds bundle b. Authorities are
// compared as sets: their order carries no meaning, and comparing it would turn a reordering
// into an update at every sync. Taint flags are not compared, since a declared bundle cannot
// express them.
func bundleEqual(a, b *spiretypes.Bundle) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.GetTrustDomain() == b.GetTrustDomain() &&
		a.GetRefreshHint() == b.GetRefreshHint() &&
		a.GetSequenceNumber() == b.GetSequenceNumber() &&
		slices.EqualFunc(sortedX509(a), sortedX509(b), bytes.Equal) &&
		slices.EqualFunc(sortedJWT(a), sortedJWT(b), func(x, y *spiretypes.JWTKey) bool {
			return x.GetKeyId() == y.GetKeyId() && bytes.Equal(x.GetPublicKey(), y.GetPublicKey()) && x.GetExpiresAt() == y.GetExpiresAt()
		})
}

func sortedX509(b *spiretypes.Bundle) [][]byte {
	out := make([][]byte, 0, len(b.GetX509Authorities()))
	for _, c := range b.GetX509Authorities() {
		out = append(out, c.GetAsn1())
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

func sortedJWT(b *spiretypes.Bundle) []*spiretypes.JWTKey {
	out := slices.Clone(b.GetJwtAuthorities())
	slices.SortFunc(out, func(x, y *spiretypes.JWTKey) int {
		return cmp.Or(cmp.Compare(x.GetKeyId(), y.GetKeyId()), bytes.Compare(x.GetPublicKey(), y.GetPublicKey()))
	})
	return out
}
