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
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// testKey returns a private key of the named type: ECDSA and Ed25519 keys are generated, RSA
// keys are read from testdata (throwaway keys made for these tests), since generating a
// 4096-bit key takes seconds.
func testKey(t *testing.T, name string) crypto.Signer {
	t.Helper()
	var (
		key crypto.Signer
		err error
	)
	switch name {
	case "P-224":
		key, err = ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	case "P-256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "P-384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "P-521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "Ed25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	case "RSA 2048", "RSA 3072", "RSA 4096":
		key, err = readRSAKey(filepath.Join("testdata", "rsa"+name[len("RSA "):]+".pem"))
	default:
		t.Fatalf("no test key type %q", name)
	}
	if err != nil {
		t.Fatalf("test key %s: %v", name, err)
	}
	return key
}

func readRSAKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, os.ErrInvalid
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	return key.(crypto.Signer), nil
}

// stubCSR returns an empty PKCS#10 request signed by key, as kubelet makes.
func stubCSR(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatalf("create CSR: %v", err)
	}
	return csr
}
