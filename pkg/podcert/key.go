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
	"crypto/rsa"
	"crypto/x509"
	"fmt"
)

// MaxStubPKCS10RequestBytes bounds spec.stubPKCS10Request before it is parsed. It is
// kube-apiserver's own limit (k8s.io/kubernetes v1.37.1 pkg/apis/certificates
// MaxStubPKCS10RequestSize, enforced by validation.validateStubPKCS10Request), so no request
// the API server admitted exceeds it.
const MaxStubPKCS10RequestBytes = 10 * 1024

// SupportedKeyTypes names the key types this signer issues for, the preferred first.
//
// kube-apiserver admits RSA 3072 and 4096, ECDSA P-256, P-384 and P-521, and Ed25519 keys.
// This signer takes the subset that SPIRE itself puts in X509-SVIDs, which is what the
// SPIFFE ecosystem's verifiers (Envoy, the SPIFFE libraries, service meshes) are built and
// tested against:
//
//   - SPIRE v1.15.3 creates workload keys of types rsa-2048, ec-p256 and ec-p384 only
//     (pkg/agent/workloadkey), its key managers add rsa-4096 (pkg/agent/plugin/keymanager),
//     and no X.509 code of it knows Ed25519 or P-521 (P-521 appears only for WIT-SVIDs).
//   - go-spiffe v2.6.0 would take an Ed25519 leaf: x509svid.Verify never looks at the leaf's
//     key type, and x509svid.Parse matches RSA, ECDSA and Ed25519 private keys. That one
//     library allows it does not make the other verifiers do so, so Ed25519 stays out until
//     SPIRE issues it.
//   - The X509-SVID specification names no key algorithm.
//
// RSA 2048, which SPIRE does issue, is absent only because kube-apiserver refuses it.
const SupportedKeyTypes = "ECDSA P-256 (preferred), ECDSA P-384, RSA 3072 and RSA 4096"

// PublicKeyOf returns the public key of a request's spec.stubPKCS10Request, or the decision
// to deny the request when the CSR is too large or does not parse (ReasonMalformedCSR) or
// its key is not of a supported type (ReasonUnsupportedKeyType, naming the supported ones).
// The CSR's signature is not checked again: kube-apiserver checked it on create, and the
// spec is immutable. Its other contents are ignored: the certificate's names come from the
// pod's ClusterSPIFFEIDs, never from the requester.
func PublicKeyOf(stubPKCS10Request []byte) (crypto.PublicKey, *Decision) {
	if len(stubPKCS10Request) > MaxStubPKCS10RequestBytes {
		return nil, Decide(ReasonMalformedCSR, "spec.stubPKCS10Request is %d bytes, more than the %d allowed",
			len(stubPKCS10Request), MaxStubPKCS10RequestBytes)
	}
	csr, err := x509.ParseCertificateRequest(stubPKCS10Request)
	if err != nil {
		return nil, Decide(ReasonMalformedCSR, "spec.stubPKCS10Request is not a PKCS#10 certificate request: %v", err)
	}
	if d := checkKeyType(csr.PublicKey); d != nil {
		return nil, d
	}
	return csr.PublicKey, nil
}

// checkKeyType returns nil for a key of a supported type, else the decision to deny it.
func checkKeyType(pub crypto.PublicKey) *Decision {
	name, ok := keyType(pub)
	if ok {
		return nil
	}
	return Decide(ReasonUnsupportedKeyType, "the key is %s; this signer issues certificates for %s keys", name, SupportedKeyTypes)
}

// keyType describes pub's type and reports whether it is one of SupportedKeyTypes.
func keyType(pub crypto.PublicKey) (string, bool) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "ECDSA P-256", true
		case elliptic.P384():
			return "ECDSA P-384", true
		}
		return "ECDSA " + k.Curve.Params().Name, false
	case *rsa.PublicKey:
		bits := k.N.BitLen()
		return fmt.Sprintf("RSA %d", bits), bits == 3072 || bits == 4096
	case ed25519.PublicKey:
		return "Ed25519", false
	}
	return fmt.Sprintf("of type %T", pub), false
}
