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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// NodeUserPrefix starts the user name of a node's identity, system:node:<name>.
	NodeUserPrefix = "system:node:"
	// NodesGroup is the group every node's identity is in; the Node authorizer
	// and NodeRestriction act only on users in it.
	NodesGroup = "system:nodes"

	// clientCAValidity and clientCertValidity outlast any test or local-up
	// session; nothing renews them.
	clientCAValidity   = 10 * 365 * 24 * time.Hour
	clientCertValidity = 365 * 24 * time.Hour
)

// clientCA is the CA kube-apiserver trusts for client certificates
// (--client-ca-file). It stays in memory for the Kube's life, so that
// identities can be minted for any name at any time, also after a restart of
// kube-apiserver.
type clientCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// newClientCA makes a self-signed ECDSA P-256 CA for client certificates.
func newClientCA() (*clientCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate client CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "realcluster-client-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(clientCAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create client CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse client CA certificate: %w", err)
	}
	return &clientCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue mints a client certificate and key, both PEM, for user in groups:
// kube-apiserver's x509 authenticator takes the user from the subject's CN
// and the groups from its O values.
func (ca *clientCA) issue(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate client key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("generate serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(clientCertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("create client certificate for %s: %w", user, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal client key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func (k *Kube) clientCAFile() string { return filepath.Join(k.dir, "pki", "client-ca.crt") }

// NodeRESTConfig returns a fresh config that authenticates as the node name,
// user system:node:<name> in group system:nodes, with a client certificate as
// a kubelet does. The node need not exist yet. It needs
// KubeOptions.NodeAuthorization: without the Node authorizer a node may do
// nothing at all.
func (k *Kube) NodeRESTConfig(name string) (*rest.Config, error) {
	if k.clientCA == nil {
		return nil, errors.New("node identities need KubeOptions.NodeAuthorization")
	}
	if name == "" {
		return nil, errors.New("node identity needs a node name")
	}
	certPEM, keyPEM, err := k.clientCA.issue(NodeUserPrefix+name, []string{NodesGroup})
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            k.host,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.ca(), CertData: certPEM, KeyData: keyPEM},
		QPS:             200,
		Burst:           400,
	}, nil
}

// NodeClient returns a clientset for NodeRESTConfig(name).
func (k *Kube) NodeClient(name string) (kubernetes.Interface, error) {
	cfg, err := k.NodeRESTConfig(name)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build clientset for node %s: %w", name, err)
	}
	return cs, nil
}
