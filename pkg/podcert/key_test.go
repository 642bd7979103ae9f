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

package podcert

import (
	"crypto"
	"strings"
	"testing"
)

func TestPublicKeyOf(t *testing.T) {
	for _, tc := range []struct {
		key        string
		wantReason Reason // "" when the key is supported
	}{
		{key: "P-256"},
		{key: "P-384"},
		{key: "RSA 3072"},
		{key: "RSA 4096"},
		{key: "P-521", wantReason: ReasonUnsupportedKeyType},
		{key: "Ed25519", wantReason: ReasonUnsupportedKeyType},
		{key: "RSA 2048", wantReason: ReasonUnsupportedKeyType},
		{key: "P-224", wantReason: ReasonUnsupportedKeyType},
	} {
		t.Run(tc.key, func(t *testing.T) {
			key := testKey(t, tc.key)
			pub, d := PublicKeyOf(stubCSR(t, key))
			if tc.wantReason == "" {
				if d != nil {
					t.Fatalf("denied: %s: %s", d.Reason, d.Message)
				}
				if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
					t.Error("the key returned is not the CSR's")
				}
				return
			}
			if d == nil {
				t.Fatal("accepted")
			}
			if pub != nil {
				t.Error("a denied key was returned")
			}
			if d.Reason != tc.wantReason || d.Type() != "Denied" {
				t.Errorf("decision %s %s, want Denied %s", d.Type(), d.Reason, tc.wantReason)
			}
			if !strings.Contains(d.Message, "ECDSA P-256") || !strings.Contains(d.Message, tc.key[strings.LastIndex(tc.key, " ")+1:]) {
				t.Errorf("message %q names neither the supported P-256 nor the key's type", d.Message)
			}
		})
	}
}

func TestPublicKeyOfMalformed(t *testing.T) {
	valid := stubCSR(t, testKey(t, "P-256"))
	for _, tc := range []struct {
		name string
		csr  []byte
		want string
	}{
		{"empty", nil, "not a PKCS#10"},
		{"garbage", []byte("garbage"), "not a PKCS#10"},
		{"truncated", valid[:len(valid)/2], "not a PKCS#10"},
		{"too large", append(valid, make([]byte, MaxStubPKCS10RequestBytes)...), "more than the 10240 allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub, d := PublicKeyOf(tc.csr)
			if d == nil || pub != nil {
				t.Fatalf("PublicKeyOf = %v, %v; want a denial", pub, d)
			}
			if d.Reason != ReasonMalformedCSR || !strings.Contains(d.Message, tc.want) {
				t.Errorf("decision %s %q, want %s containing %q", d.Reason, d.Message, ReasonMalformedCSR, tc.want)
			}
		})
	}
}
