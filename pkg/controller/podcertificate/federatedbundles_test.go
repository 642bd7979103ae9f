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

package podcertificate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const testFederatedSigner = "spire.spiffe.io/x509-svid-federated"

// rootCert is a self-signed CA certificate standing for a federated trust domain's authority.
func rootCert(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// relationship is a federation relationship of SPIRE's with td, whose bundle holds roots.
func relationship(td string, roots ...*x509.Certificate) *types.FederationRelationship {
	bundle := &types.Bundle{TrustDomain: td}
	for _, r := range roots {
		bundle.X509Authorities = append(bundle.X509Authorities, &types.X509Certificate{Asn1: r.Raw})
	}
	return &types.FederationRelationship{
		TrustDomain: td, BundleEndpointUrl: "https://" + td + "/bundle",
		BundleEndpointProfile: &types.FederationRelationship_HttpsWeb{HttpsWeb: &types.HTTPSWebProfile{}},
		TrustDomainBundle:     bundle,
	}
}

// TestSyncFederatedBundles: each trust domain SPIRE federates with has its own bundle of the
// federated signer name, labelled with its trust domain, holding what SPIRE holds; it follows
// a rotation and is deleted when the federation ends. The signer name of the pods'
// certificates never carries a federated authority, and a bundle of the federated signer name
// spire-registrar did not publish is left alone.
func TestSyncFederatedBundles(t *testing.T) {
	env := newTestEnv(t, envOptions{options: func(o *Options) { o.FederatedSignerName = testFederatedSigner }})
	planted := trustBundle("spire.spiffe.io:x509-svid-federated:planted", testFederatedSigner, "someone else's roots")
	env.add(t, planted)
	const fedName, webName = "spire.spiffe.io:x509-svid-federated:fed.org", "spire.spiffe.io:x509-svid-federated:web.example"
	fedRoot, webRoot := rootCert(t, "fed"), rootCert(t, "web")
	sync := func(t *testing.T) {
		t.Helper()
		env.kube.ClearActions()
		if err := env.c.resync(env.ctx); err != nil {
			t.Fatalf("resync: %v", err)
		}
		if err := env.c.syncBundle(env.ctx, bundleKey); err != nil {
			t.Fatalf("syncBundle: %v", err)
		}
		env.informBundles(t)
	}
	// federated returns the bundles of the federated signer name a pod selecting trust
	// domain td gets, by name.
	federated := func(t *testing.T, td string) map[string][]*x509.Certificate {
		t.Helper()
		list, err := env.kube.CertificatesV1().ClusterTrustBundles().List(env.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]*x509.Certificate{}
		for _, b := range list.Items {
			if b.Spec.SignerName == testSignerName {
				for _, c := range parseChain(t, b.Spec.TrustBundle) {
					if c.Equal(fedRoot) || c.Equal(webRoot) {
						t.Errorf("bundle %s of the pods' signer name holds a federated authority", b.Name)
					}
				}
			}
			if b.Spec.SignerName != testFederatedSigner || !labels.SelectorFromSet(labels.Set{TrustDomainLabel: td}).Matches(labels.Set(b.Labels)) {
				continue
			}
			out[b.Name] = parseChain(t, b.Spec.TrustBundle)
		}
		return out
	}

	env.spire.SetRelationships(relationship("fed.org", fedRoot), relationship("web.example", webRoot), relationship("pending.example"))
	sync(t)
	if diff := cmp.Diff([]string{"create clustertrustbundles " + fedName, "create clustertrustbundles " + webName}, filterWrites(env.writes(), "federated")); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if got := federated(t, "fed.org"); len(got) != 1 || !certsEqual(got[fedName], []*x509.Certificate{fedRoot}) {
		t.Errorf("bundles labelled fed.org: %v, want %s with fed.org's root", got, fedName)
	}

	rotated := rootCert(t, "fed-next")
	env.spire.SetRelationships(relationship("fed.org", fedRoot, rotated), relationship("web.example", webRoot))
	sync(t)
	if diff := cmp.Diff([]string{"update clustertrustbundles " + fedName}, env.writes()); diff != "" {
		t.Errorf("after fed.org's rotation, writes (-want +got):\n%s", diff)
	}
	if got := federated(t, "fed.org")[fedName]; !certsEqual(got, []*x509.Certificate{fedRoot, rotated}) {
		t.Errorf("after fed.org's rotation the bundle holds %d certificates, want both roots", len(got))
	}

	env.spire.SetRelationships(relationship("web.example", webRoot))
	sync(t)
	if diff := cmp.Diff([]string{"delete clustertrustbundles " + fedName}, env.writes()); diff != "" {
		t.Errorf("after the federation with fed.org ended, writes (-want +got):\n%s", diff)
	}
	if got := federated(t, "fed.org"); len(got) != 0 {
		t.Errorf("after the federation with fed.org ended, bundles labelled fed.org: %v", got)
	}
	if _, err := env.kube.CertificatesV1().ClusterTrustBundles().Get(env.ctx, planted.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the bundle spire-registrar did not publish is gone: %v", err)
	}
}

// filterWrites keeps the writes whose object name holds part.
func filterWrites(writes []string, part string) []string {
	var out []string
	for _, w := range writes {
		if strings.Contains(w, part) {
			out = append(out, w)
		}
	}
	return out
}

// TestFederatedBundleName: the federated signer name, then the trust domain, or its hash when
// the trust domain cannot end a bundle name; two such trust domains get two names.
func TestFederatedBundleName(t *testing.T) {
	if got, want := federatedBundleName(testFederatedSigner, "fed.org"), "spire.spiffe.io:x509-svid-federated:fed.org"; got != want {
		t.Errorf("federatedBundleName = %q, want %q", got, want)
	}
	a, b := federatedBundleName(testFederatedSigner, "a_b"), federatedBundleName(testFederatedSigner, "a_c")
	if a == b || !strings.HasPrefix(a, "spire.spiffe.io:x509-svid-federated:td-") {
		t.Errorf("names of a_b and a_c: %q, %q; want two names with a td- hash", a, b)
	}
}

// TestStartRefusesAnotherInstancesBundle: a bundle of the signer name or of the federated
// signer name that another spire-registrar (another trust domain or className) published
// stops start-up, naming it; a bundle spire-registrar did not publish does not.
func TestStartRefusesAnotherInstancesBundle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wantErr string
	}{
		{name: "another trust domain's", wantErr: "spire.spiffe.io:x509-svid:example.net of signer spire.spiffe.io/x509-svid belongs to another spire-registrar (trust domain example.net"},
		{name: "another class's federated bundle", wantErr: "spire.spiffe.io:x509-svid-federated:fed.org of signer spire.spiffe.io/x509-svid-federated belongs to another spire-registrar (trust domain example.org, className \"blue\")"},
		{name: "not spire-registrar's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{noStart: true, options: func(o *Options) { o.FederatedSignerName = testFederatedSigner }})
			switch tc.name {
			case "another trust domain's":
				env.addToAPI(t, marked(trustBundle("spire.spiffe.io:x509-svid:example.net", testSignerName, "x"), "example.net", bundleOwner{trustDomain: "example.net"}))
			case "another class's federated bundle":
				env.addToAPI(t, marked(trustBundle("spire.spiffe.io:x509-svid-federated:fed.org", testFederatedSigner, "x"), "fed.org", bundleOwner{trustDomain: "example.org", className: "blue"}))
			default:
				env.addToAPI(t, trustBundle("spire.spiffe.io:x509-svid:planted", testSignerName, "x"))
			}
			err := env.c.Start(env.ctx)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Start: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "podCertificates.signerName")):
				t.Errorf("Start = %v, want an error naming podCertificates.signerName and %q", err, tc.wantErr)
			}
		})
	}
}
