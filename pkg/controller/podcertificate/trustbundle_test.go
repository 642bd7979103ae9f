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
	"crypto/x509"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// testBundleName is the ClusterTrustBundle the controller publishes for testSignerName and
// the SPIRE fake's trust domain.
const testBundleName = "spire.spiffe.io:x509-svid:example.org"

func trustBundle(name, signerName, pemBundle string) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: pemBundle},
	}
}

// apiBundles returns the API server's ClusterTrustBundles by name.
func (env *testEnv) apiBundles(t *testing.T) map[string]certificatesv1.ClusterTrustBundleSpec {
	t.Helper()
	list, err := env.kube.CertificatesV1().ClusterTrustBundles().List(env.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]certificatesv1.ClusterTrustBundleSpec{}
	for _, b := range list.Items {
		out[b.Name] = b.Spec
	}
	return out
}

// certsEqual reports whether two lists hold the same certificates in any order.
func certsEqual(a, b []*x509.Certificate) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(c *x509.Certificate) bool { return !slices.ContainsFunc(b, c.Equal) })
}

// marked is b with the marks of the instance that owns it (trust domain and className) and
// of the trust domain whose authorities it holds.
func marked(b *certificatesv1.ClusterTrustBundle, bundleTD string, owner bundleOwner) *certificatesv1.ClusterTrustBundle {
	setMarks(&b.ObjectMeta, bundleTD, owner)
	return b
}

// testOwner is the test controller as its bundles' owner marks name it.
var testOwner = bundleOwner{trustDomain: "example.org"}

// TestSyncBundle: after a resync has listed SPIRE's authorities, the signer name has one
// ClusterTrustBundle of the controller's, marked as its own, holding exactly those
// authorities. Only bundles marked as its own are updated or deleted: another instance's
// are reported and left, and so are bundles spire-registrar did not publish and bundles of
// other signer names.
func TestSyncBundle(t *testing.T) {
	const otherSigner = "example.com/other"
	otherBundle := trustBundle("example.com:other:roots", otherSigner, "other roots")
	planted := trustBundle("spire.spiffe.io:x509-svid:planted", testSignerName, "someone else's roots")
	otherTD := marked(trustBundle("spire.spiffe.io:x509-svid:example.net", testSignerName, "example.net roots"), "example.net", bundleOwner{trustDomain: "example.net"})
	otherClass := marked(trustBundle("spire.spiffe.io:x509-svid:blue", testSignerName, "blue roots"), "example.org", bundleOwner{trustDomain: "example.org", className: "blue"})
	for _, tc := range []struct {
		name string
		// existing are in the API server and the informer's cache; current stands for the
		// PEM of SPIRE's authorities, which a test only knows once the fake has made them.
		existing   func(current string) []runtime.Object
		wantWrites []string
		wantOthers map[string]certificatesv1.ClusterTrustBundleSpec
		// wantErr, when set, is in the error syncBundle returns, having done its writes.
		wantErr string
	}{
		{
			name:       "no bundle: create",
			wantWrites: []string{"create clustertrustbundles " + testBundleName},
		},
		{
			name: "ours is stale: update",
			existing: func(string) []runtime.Object {
				return []runtime.Object{marked(trustBundle(testBundleName, testSignerName, "stale"), "example.org", testOwner)}
			},
			wantWrites: []string{"update clustertrustbundles " + testBundleName},
		},
		{
			name: "ours is current: nothing",
			existing: func(current string) []runtime.Object {
				return []runtime.Object{marked(trustBundle(testBundleName, testSignerName, current), "example.org", testOwner)}
			},
		},
		{
			name: "ours from before owner marks: marked",
			existing: func(current string) []runtime.Object {
				b := trustBundle(testBundleName, testSignerName, current)
				b.Labels = map[string]string{ManagedByLabel: ManagedBy}
				return []runtime.Object{b}
			},
			wantWrites: []string{"update clustertrustbundles " + testBundleName},
		},
		{
			name: "ours under another name: delete it",
			existing: func(current string) []runtime.Object {
				return []runtime.Object{
					marked(trustBundle(testBundleName, testSignerName, current), "example.org", testOwner),
					marked(trustBundle("spire.spiffe.io:x509-svid:trust-bundle", testSignerName, "old"), "example.org", testOwner),
				}
			},
			wantWrites: []string{"delete clustertrustbundles spire.spiffe.io:x509-svid:trust-bundle"},
		},
		{
			name: "a bundle of the signer name spire-registrar did not publish: left alone",
			existing: func(current string) []runtime.Object {
				return []runtime.Object{marked(trustBundle(testBundleName, testSignerName, current), "example.org", testOwner), planted}
			},
			wantOthers: map[string]certificatesv1.ClusterTrustBundleSpec{planted.Name: planted.Spec},
		},
		{
			name: "only a bundle spire-registrar did not publish: left alone, ours created",
			existing: func(string) []runtime.Object {
				return []runtime.Object{planted}
			},
			wantWrites: []string{"create clustertrustbundles " + testBundleName},
			wantOthers: map[string]certificatesv1.ClusterTrustBundleSpec{planted.Name: planted.Spec},
		},
		{
			name: "another trust domain's and another class's bundles: left alone and reported",
			existing: func(string) []runtime.Object {
				return []runtime.Object{otherTD, otherClass}
			},
			wantWrites: []string{"create clustertrustbundles " + testBundleName},
			wantOthers: map[string]certificatesv1.ClusterTrustBundleSpec{otherTD.Name: otherTD.Spec, otherClass.Name: otherClass.Spec},
			wantErr:    "spire.spiffe.io:x509-svid:blue (trust domain example.org, className \"blue\"), spire.spiffe.io:x509-svid:example.net (trust domain example.net",
		},
		{
			name: "bundles of other signer names and none: left alone",
			existing: func(string) []runtime.Object {
				return []runtime.Object{otherBundle, trustBundle("unsigned-roots", "", "unsigned roots")}
			},
			wantWrites: []string{"create clustertrustbundles " + testBundleName},
			wantOthers: map[string]certificatesv1.ClusterTrustBundleSpec{
				otherBundle.Name: otherBundle.Spec,
				"unsigned-roots": {TrustBundle: "unsigned roots"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{})
			if err := env.c.resync(env.ctx); err != nil {
				t.Fatalf("resync: %v", err)
			}
			if env.c.bundleQueue.Len() != 1 {
				t.Errorf("resync queued %d bundle keys, want 1", env.c.bundleQueue.Len())
			}
			authorities, err := env.authority.BundleX509Authorities(env.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.existing != nil {
				env.add(t, tc.existing(bundlePEM(authorities))...)
			}
			err = env.c.syncBundle(env.ctx, bundleKey)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("syncBundle: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("syncBundle = %v, want an error with %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantWrites, env.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			all, err := env.kube.CertificatesV1().ClusterTrustBundles().Get(env.ctx, testBundleName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("no ClusterTrustBundle %s: %v", testBundleName, err)
			}
			if !hasMarks(all.ObjectMeta, "example.org", testOwner) {
				t.Errorf("ClusterTrustBundle %s lacks the owner marks: labels %v, annotations %v", testBundleName, all.Labels, all.Annotations)
			}
			got := env.apiBundles(t)
			ours := got[testBundleName]
			if ours.SignerName != testSignerName {
				t.Errorf("signer name %q, want %q", ours.SignerName, testSignerName)
			}
			if !certsEqual(parseChain(t, ours.TrustBundle), env.spire.X509Authorities()) {
				t.Errorf("the bundle does not hold exactly the SPIRE fake's authorities:\n%s", ours.TrustBundle)
			}
			delete(got, testBundleName)
			if diff := cmp.Diff(tc.wantOthers, got, cmpEmptyMap); diff != "" {
				t.Errorf("other bundles (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpEmptyMap = cmp.Comparer(func(a, b map[string]certificatesv1.ClusterTrustBundleSpec) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return cmp.Equal(a, b)
})

// TestSyncBundleFollowsRotation: after SPIRE rotates its authority, the next resync updates
// the bundle to hold the old and the new one.
func TestSyncBundleFollowsRotation(t *testing.T) {
	env := newTestEnv(t, envOptions{})
	sync := func() {
		t.Helper()
		if err := env.c.resync(env.ctx); err != nil {
			t.Fatalf("resync: %v", err)
		}
		if err := env.c.syncBundle(env.ctx, bundleKey); err != nil {
			t.Fatalf("syncBundle: %v", err)
		}
		env.informBundles(t)
	}
	sync()
	if got := parseChain(t, env.apiBundles(t)[testBundleName].TrustBundle); !certsEqual(got, env.spire.X509Authorities()) || len(got) != 1 {
		t.Fatalf("first bundle holds %d certificates, want the one root", len(got))
	}
	env.kube.ClearActions()
	sync()
	if w := env.writes(); len(w) != 0 {
		t.Errorf("a resync with nothing new wrote %v", w)
	}

	env.spire.RotateX509Authority()
	sync()
	if diff := cmp.Diff([]string{"update clustertrustbundles " + testBundleName}, env.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if got := parseChain(t, env.apiBundles(t)[testBundleName].TrustBundle); !certsEqual(got, env.spire.X509Authorities()) || len(got) != 2 {
		t.Errorf("after rotation the bundle holds %d certificates, want both roots", len(got))
	}
}

// TestSyncBundleBeforeAuthorities: before SPIRE's authorities were first listed, the
// controller does not know what the bundle should hold and touches nothing, not even a
// bundle of its own it would delete.
func TestSyncBundleBeforeAuthorities(t *testing.T) {
	env := newTestEnv(t, envOptions{})
	env.add(t, marked(trustBundle("spire.spiffe.io:x509-svid:old", testSignerName, "old roots"), "example.org", testOwner))
	if err := env.c.syncBundle(env.ctx, bundleKey); err != nil {
		t.Fatalf("syncBundle: %v", err)
	}
	if w := env.writes(); len(w) != 0 {
		t.Errorf("wrote %v before SPIRE's authorities were listed", w)
	}
}

// TestSyncBundleDryRun: a dry run creates, updates and deletes no bundle.
func TestSyncBundleDryRun(t *testing.T) {
	for _, existing := range [][]runtime.Object{
		nil,
		{marked(trustBundle(testBundleName, testSignerName, "stale"), "example.org", testOwner), marked(trustBundle("spire.spiffe.io:x509-svid:old", testSignerName, "x"), "example.org", testOwner)},
	} {
		env := newTestEnv(t, envOptions{options: func(o *Options) { o.DryRun = true }})
		env.add(t, existing...)
		if err := env.c.resync(env.ctx); err != nil {
			t.Fatalf("resync: %v", err)
		}
		if err := env.c.syncBundle(env.ctx, bundleKey); err != nil {
			t.Fatalf("syncBundle: %v", err)
		}
		if w := env.writes(); len(w) != 0 {
			t.Errorf("a dry run wrote %v", w)
		}
	}
}

// TestBundlePEMIsDeterministic: the same authorities in any order give the same bundle, so
// that listing them again never rewrites it.
func TestBundlePEMIsDeterministic(t *testing.T) {
	env := newTestEnv(t, envOptions{})
	env.spire.RotateX509Authority()
	env.spire.RotateX509Authority()
	var authorities []spire.X509Authority
	for _, c := range env.spire.X509Authorities() {
		authorities = append(authorities, spire.X509Authority{Certificate: c})
	}
	want := bundlePEM(authorities)
	if got := parseChain(t, want); !certsEqual(got, env.spire.X509Authorities()) {
		t.Fatalf("bundle holds %d certificates, not the fake's %d", len(got), len(authorities))
	}
	for _, perm := range [][]int{{0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		shuffled := make([]spire.X509Authority, 0, len(authorities))
		for _, i := range perm {
			shuffled = append(shuffled, authorities[i])
		}
		if got := bundlePEM(shuffled); got != want {
			t.Errorf("order %v gives another bundle", perm)
		}
	}
}

// TestBundleName: the signer name with ":" for "/", then ":" and the trust domain, or a
// fixed suffix when the trust domain is not a DNS subdomain (it may hold "_").
func TestBundleName(t *testing.T) {
	for _, tc := range []struct{ signer, td, want string }{
		{"spire.spiffe.io/x509-svid", "example.org", "spire.spiffe.io:x509-svid:example.org"},
		{"example.com/a/b", "prod.example.com", "example.com:a:b:prod.example.com"},
		{"example.com/svid", "my_domain", "example.com:svid:trust-bundle"},
	} {
		if got := bundleName(tc.signer, tc.td); got != tc.want {
			t.Errorf("bundleName(%q, %q) = %q, want %q", tc.signer, tc.td, got, tc.want)
		}
	}
}

// TestResyncPublishesBundleWhenCARenewalFails: the trust bundle does not depend on the CA.
// When SPIRE lists its authorities but will not sign a CA, the resync fails (and is retried)
// but the bundle is still brought up to date: verifiers of agents' SVIDs need SPIRE's new
// authorities whether or not this controller can sign.
func TestResyncPublishesBundleWhenCARenewalFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*spiretest.Server)
	}{
		{name: "SPIRE unavailable for the CA", fail: func(s *spiretest.Server) { s.FailNext(spiretest.MethodNewDownstreamX509CA, 10, codes.Unavailable) }},
		{name: "not downstream", fail: func(s *spiretest.Server) { s.DenyDownstream(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{noStart: true})
			tc.fail(env.spire)
			if err := env.c.resync(env.ctx); err == nil {
				t.Fatal("resync succeeded without a CA")
			}
			if env.c.bundleQueue.Len() != 1 {
				t.Fatalf("resync queued %d bundle keys, want 1", env.c.bundleQueue.Len())
			}
			if err := env.c.syncBundle(env.ctx, bundleKey); err != nil {
				t.Fatalf("syncBundle: %v", err)
			}
			if got := parseChain(t, env.apiBundles(t)[testBundleName].TrustBundle); !certsEqual(got, env.spire.X509Authorities()) {
				t.Errorf("the bundle does not hold the SPIRE fake's authorities")
			}
		})
	}
}
