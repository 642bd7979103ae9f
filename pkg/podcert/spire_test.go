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

package podcert_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/spire-registrar/spire-registrar/pkg/podcert"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// TestIssueWithSPIREDownstreamCA issues with a CA from spire.AuthorityClient, as the
// controller will: what SPIRE's NewDownstreamX509CA hands out is what Issue signs with, and
// the result verifies against the authorities SPIRE returned.
func TestIssueWithSPIREDownstreamCA(t *testing.T) {
	ctx := context.Background()
	srv := spiretest.New(t)
	client, err := spire.Dial(ctx, srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	ca, err := client.Authority().NewDownstreamX509CA(ctx, 6*time.Hour)
	if err != nil {
		t.Fatalf("NewDownstreamX509CA: %v", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	pub, d := podcert.PublicKeyOf(csr)
	if d != nil {
		t.Fatalf("PublicKeyOf: %s", d.Message)
	}
	now := time.Now()
	v, err := podcert.Lifetime(now, nil, 0, ca.NotAfter())
	if err != nil {
		t.Fatalf("Lifetime: %v", err)
	}
	if got := v.NotAfter.Sub(v.NotBefore); got > 6*time.Hour+podcert.Backdate {
		t.Errorf("lifetime %v outlasts the CA's 6h", got)
	}
	id := spiffeid.RequireFromString("spiffe://" + spiretest.DefaultTrustDomain + "/ns/default/sa/web")
	chainPEM, _, err := podcert.Issue(podcert.CA{Chain: ca.Chain, Key: ca.Key}, pub, id, []string{"web.default.svc"}, v)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}

	var ders [][]byte
	for rest := []byte(chainPEM); ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		ders = append(ders, block.Bytes)
	}
	bundle := x509bundle.FromX509Authorities(id.TrustDomain(), ca.Authorities)
	got, _, err := x509svid.ParseAndVerify(ders, bundle, x509svid.WithTime(now))
	if err != nil {
		t.Fatalf("x509svid.ParseAndVerify: %v", err)
	}
	if got != id {
		t.Errorf("verified ID %s, want %s", got, id)
	}
}
