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

package realcluster

import (
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
)

// TestAPIServerArgsNodeAuthorization checks that NodeAuthorization adds the
// Node authorizer, NodeRestriction and the client CA, and that without it
// kube-apiserver keeps RBAC alone and no client CA.
func TestAPIServerArgsNodeAuthorization(t *testing.T) {
	off := (&Kube{dir: "/d"}).apiServerArgs(1, nil)
	if !slices.Contains(off, "--authorization-mode=RBAC") || hasFlag(off, "--enable-admission-plugins") || hasFlag(off, "--client-ca-file") {
		t.Errorf("without NodeAuthorization: %v", off)
	}
	ca, err := newClientCA()
	if err != nil {
		t.Fatal(err)
	}
	on := (&Kube{dir: "/d", clientCA: ca}).apiServerArgs(1, nil)
	for _, want := range []string{"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--client-ca-file=/d/pki/client-ca.crt"} {
		if !slices.Contains(on, want) {
			t.Errorf("with NodeAuthorization, no %s in %v", want, on)
		}
	}
	if slices.Contains(on, "--authorization-mode=RBAC") {
		t.Errorf("with NodeAuthorization, RBAC alone too: %v", on)
	}
}

// TestClientCAIssue checks the subject kube-apiserver's x509 authenticator
// reads a node's identity from, and that the CA verifies the certificate.
func TestClientCAIssue(t *testing.T) {
	ca, err := newClientCA()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.issue(NodeUserPrefix+"n1", []string{NodesGroup})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:n1" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %s", cert.Subject)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client CA does not verify its client certificate: %v", err)
	}
}

func hasFlag(args []string, name string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, name+"=") })
}
