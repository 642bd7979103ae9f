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
	"crypto"
	"crypto/x509"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/testing/protocmp"
)

func TestParseBundle(t *testing.T) {
	td := spiffeid.RequireTrustDomainFromString("fed.org")
	ca1, ca2 := newCA(t, "fed.org"), newCA(t, "fed.org")
	k1, k2 := newJWTKey(t), newJWTKey(t)
	doc := bundleDoc(t, "fed.org", []*x509.Certificate{ca1, ca2}, map[string]crypto.PublicKey{"kid-b": k2, "kid-a": k1}, 5*time.Minute, 42)

	b, err := parseBundle(td, doc)
	if err != nil {
		t.Fatal(err)
	}
	pkix := func(k crypto.PublicKey) []byte {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	// X.509 authorities keep the document's order; JWT authorities are sorted by key ID.
	want := &spiretypes.Bundle{
		TrustDomain:     "fed.org",
		X509Authorities: []*spiretypes.X509Certificate{{Asn1: ca1.Raw}, {Asn1: ca2.Raw}},
		JwtAuthorities:  []*spiretypes.JWTKey{{KeyId: "kid-a", PublicKey: pkix(k1)}, {KeyId: "kid-b", PublicKey: pkix(k2)}},
		RefreshHint:     300,
		SequenceNumber:  42,
	}
	if diff := cmp.Diff(want, b, protocmp.Transform()); diff != "" {
		t.Errorf("bundle (-want +got):\n%s", diff)
	}
}

func TestBundleEqual(t *testing.T) {
	base := func() *spiretypes.Bundle {
		return &spiretypes.Bundle{
			TrustDomain:     "fed.org",
			X509Authorities: []*spiretypes.X509Certificate{{Asn1: []byte("ca-1")}, {Asn1: []byte("ca-2")}},
			JwtAuthorities:  []*spiretypes.JWTKey{{KeyId: "a", PublicKey: []byte("pk-a")}, {KeyId: "b", PublicKey: []byte("pk-b")}},
			RefreshHint:     300,
			SequenceNumber:  7,
		}
	}
	tests := []struct {
		name   string
		mutate func(*spiretypes.Bundle)
		equal  bool
	}{
		{name: "same", mutate: func(*spiretypes.Bundle) {}, equal: true},
		{name: "authorities reordered", mutate: func(b *spiretypes.Bundle) {
			b.X509Authorities[0], b.X509Authorities[1] = b.X509Authorities[1], b.X509Authorities[0]
			b.JwtAuthorities[0], b.JwtAuthorities[1] = b.JwtAuthorities[1], b.JwtAuthorities[0]
		}, equal: true},
		{name: "tainted flag", mutate: func(b *spiretypes.Bundle) { b.X509Authorities[0].Tainted = true }, equal: true},
		{name: "trust domain", mutate: func(b *spiretypes.Bundle) { b.TrustDomain = "other.org" }},
		{name: "refresh hint", mutate: func(b *spiretypes.Bundle) { b.RefreshHint = 60 }},
		{name: "sequence number", mutate: func(b *spiretypes.Bundle) { b.SequenceNumber = 8 }},
		{name: "X.509 authority replaced", mutate: func(b *spiretypes.Bundle) { b.X509Authorities[1].Asn1 = []byte("ca-3") }},
		{name: "X.509 authority removed", mutate: func(b *spiretypes.Bundle) { b.X509Authorities = b.X509Authorities[:1] }},
		{name: "JWT key ID", mutate: func(b *spiretypes.Bundle) { b.JwtAuthorities[1].KeyId = "c" }},
		{name: "JWT public key", mutate: func(b *spiretypes.Bundle) { b.JwtAuthorities[1].PublicKey = []byte("pk-c") }},
		{name: "JWT expiry", mutate: func(b *spiretypes.Bundle) { b.JwtAuthorities[1].ExpiresAt = 1 }},
		{name: "JWT authority added", mutate: func(b *spiretypes.Bundle) {
			b.JwtAuthorities = append(b.JwtAuthorities, &spiretypes.JWTKey{KeyId: "c", PublicKey: []byte("pk-c")})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base()
			tt.mutate(b)
			if got := bundleEqual(base(), b); got != tt.equal {
				t.Errorf("bundleEqual = %v, want %v", got, tt.equal)
			}
			if got := bundleEqual(b, base()); got != tt.equal {
				t.Errorf("bundleEqual (swapped) = %v, want %v", got, tt.equal)
			}
		})
	}
	if bundleEqual(base(), nil) || bundleEqual(nil, base()) || !bundleEqual(nil, nil) {
		t.Errorf("nil handling is wrong")
	}
}
