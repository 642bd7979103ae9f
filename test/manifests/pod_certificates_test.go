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

package manifests_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// podCertificateSigner is the one signer name the pod-certificates component grants sign
	// and attest for: the default of the config's podCertificates.signerName.
	podCertificateSigner = "spire.spiffe.io/x509-svid"
	// podCertificateRole names the component's ClusterRole and ClusterRoleBinding.
	podCertificateRole = "spire-registrar-pod-certificates"
	// federatedSigner is the signer name the component grants attest for, for the bundles of
	// federated trust domains (podCertificates.federatedSignerName in the examples).
	federatedSigner = "spire.spiffe.io/x509-svid-federated"
	// otherSigner stands for any signer that is not spire-registrar's.
	otherSigner = "example.com/other"
)

// podCertificateRuns numbers TestPodCertificatesLeastPrivilege's runs in this process, so
// that -count=2 reuses the shared API server with fresh names.
var podCertificateRuns atomic.Int64

// wantPodCertificateRules are the pod-certificates component's ClusterRole rules, exactly.
var wantPodCertificateRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"podcertificaterequests"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"podcertificaterequests/status"}, Verbs: []string{"update"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{podCertificateSigner}, Verbs: []string{"sign"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{podCertificateSigner, federatedSigner}, Verbs: []string{"attest"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}, Verbs: []string{"create", "update", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get"}},
	{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get", "list"}},
}

// nodeOnlyPolicy names the component's ValidatingAdmissionPolicy and its binding.
const nodeOnlyPolicy = "spire-registrar-pod-certificates-node-only"

// TestPodCertificatesComponent checks what manifests/pod-certificates adds to manifests/tcp-mtls
// (testdata/pod-certificates uses them as an operator would): its ClusterRole, bound to the
// spire-registrar ServiceAccount, and the node-only admission policy with its binding, and
// nothing else; every object of tcp-mtls is left as is.
func TestPodCertificatesComponent(t *testing.T) {
	objs := kustomize(t, "test", "manifests", "testdata", "pod-certificates")
	base := kustomize(t, "manifests", "tcp-mtls")
	want := append(slices.Clone(deploymentTopologyObjects), "ClusterRole /"+podCertificateRole, "ClusterRoleBinding /"+podCertificateRole,
		"ValidatingAdmissionPolicy /"+nodeOnlyPolicy, "ValidatingAdmissionPolicyBinding /"+nodeOnlyPolicy)
	slices.Sort(want)
	if got := ids(objs); !slices.Equal(got, want) {
		t.Fatalf("tcp-mtls with the component renders\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, o := range base {
		if diff := cmp.Diff(o.Object, find(t, objs, o.GetKind(), o.GetName()).Object); diff != "" {
			t.Errorf("the component changed %s (-without +with):\n%s", id(o), diff)
		}
	}

	role := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", podCertificateRole))
	if diff := cmp.Diff(wantPodCertificateRules, role.Rules); diff != "" {
		t.Errorf("ClusterRole %s rules (-want +got):\n%s", podCertificateRole, diff)
	}
	crb := typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", podCertificateRole))
	if diff := cmp.Diff(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: podCertificateRole}, crb.RoleRef); diff != "" {
		t.Errorf("ClusterRoleBinding roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]rbacv1.Subject{subject(namespace, serviceAccount)}, crb.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding subjects (-want +got):\n%s", diff)
	}
}

// podCertificateAccesses are what the signer needs, as access reviews ask for them: requests
// read everywhere and their status written, sign and attest for its signer name, and its
// ClusterTrustBundles read and written.
func podCertificateAccesses() (reads, writes []access) {
	const group = "certificates.k8s.io"
	reads = append(reads, accesses([]string{"get", "list", "watch"}, group, []string{"podcertificaterequests"}, "", "")...)
	reads = append(reads, accesses([]string{"get", "list", "watch"}, group, []string{"podcertificaterequests"}, "", metav1.NamespaceDefault)...)
	reads = append(reads, serviceAccountReads()...)
	reads = append(reads, accesses([]string{"get", "list"}, "admissionregistration.k8s.io",
		[]string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, "", "")...)
	writes = append(writes, accesses([]string{"update"}, group, []string{"podcertificaterequests"}, "status", "")...)
	writes = append(writes, accesses([]string{"update"}, group, []string{"podcertificaterequests"}, "status", metav1.NamespaceDefault)...)
	writes = append(writes, named(accesses([]string{"sign", "attest"}, group, []string{"signers"}, "", ""), podCertificateSigner)...)
	writes = append(writes, named(accesses([]string{"attest"}, group, []string{"signers"}, "", ""), federatedSigner)...)
	writes = append(writes, accesses([]string{"create", "update", "delete"}, group, []string{"clustertrustbundles"}, "", "")...)
	writes = append(writes, named(accesses([]string{"update", "delete"}, group, []string{"clustertrustbundles"}, "", ""), bundleName("example.org"))...)
	return reads, writes
}

// serviceAccountReads are the gets of service accounts the signer checks requests against,
// which the base role denies.
func serviceAccountReads() []access {
	return append(accesses([]string{"get"}, "", []string{"serviceaccounts"}, "", ""), accesses([]string{"get"}, "", []string{"serviceaccounts"}, "", namespace)...)
}

// clusterTrustBundleReads are the reads of ClusterTrustBundles, which kube-apiserver's default
// policy gives every ServiceAccount (system:cluster-trust-bundle-discovery).
func clusterTrustBundleReads() []access {
	return accesses([]string{"get", "list", "watch"}, "certificates.k8s.io", []string{"clustertrustbundles"}, "", "")
}

// podCertificateDenied are what the signer must not be able to do even with the component:
// sign or attest for another signer, and anything on requests but reading them and writing
// their status.
func podCertificateDenied() []access {
	const group = "certificates.k8s.io"
	var denied []access
	for _, signer := range []string{
		"kubernetes.io/kube-apiserver-client-pod", otherSigner, "spire.spiffe.io/other",
		// kube-apiserver also accepts a grant for "<domain>/*" for any signer of the domain.
		"spire.spiffe.io/*",
	} {
		denied = append(denied, named(accesses([]string{"sign", "attest", "approve"}, group, []string{"signers"}, "", ""), signer)...)
	}
	denied = append(denied, accesses([]string{"sign", "attest"}, group, []string{"signers"}, "", "")...)
	denied = append(denied, named(accesses([]string{"approve"}, group, []string{"signers"}, "", ""), podCertificateSigner)...)
	// The federated signer name only publishes bundles: nothing is signed for it.
	denied = append(denied, named(accesses([]string{"sign", "approve"}, group, []string{"signers"}, "", ""), federatedSigner)...)
	denied = append(denied, accesses([]string{"create", "update", "patch", "delete", "deletecollection"}, group, []string{"podcertificaterequests"}, "", metav1.NamespaceDefault)...)
	denied = append(denied, accesses([]string{"patch"}, group, []string{"podcertificaterequests"}, "status", metav1.NamespaceDefault)...)
	denied = append(denied, accesses([]string{"patch", "deletecollection"}, group, []string{"clustertrustbundles"}, "", "")...)
	// The other certificate API: CertificateSigningRequests.
	denied = append(denied, accesses([]string{"get", "list", "create", "update", "delete"}, group, []string{"certificatesigningrequests"}, "", "")...)
	denied = append(denied, accesses([]string{"update"}, group, []string{"certificatesigningrequests"}, "status", "")...)
	denied = append(denied, accesses([]string{"update"}, group, []string{"certificatesigningrequests"}, "approval", "")...)
	return denied
}

// bundleName is the name of the ClusterTrustBundle spire-registrar publishes a trust domain's
// X.509 authorities in: kube-apiserver requires a signer's bundles to be named
// "<signer name with ':' for '/'>:<anything>".
func bundleName(trustDomain string) string {
	return strings.ReplaceAll(podCertificateSigner, "/", ":") + ":" + trustDomain
}

// TestPodCertificatesLeastPrivilege applies manifests/tcp-mtls with the pod-certificates
// component to the real kube-apiserver and checks, as the spire-registrar ServiceAccount, that
// the component grants the signer what it needs and nothing more, and that without it the
// ServiceAccount has none of it. Then it writes, as the ServiceAccount, what the signer
// writes: a request's status and ClusterTrustBundles, for its own signer and for another.
func TestPodCertificatesLeastPrivilege(t *testing.T) {
	k := cluster(t)
	ctx := t.Context()
	admin := k.RESTConfig()
	adminKube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	saConfig := serviceAccountConfig(t, ctx, admin, nil)
	saKube, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	reads, writes := podCertificateAccesses()
	// The component is in force once its plainest rule is; the reviews then say what else differs.
	inForce := access{verb: "get", group: "certificates.k8s.io", resource: "podcertificaterequests", namespace: metav1.NamespaceDefault}

	t.Run("without the component", func(t *testing.T) {
		var denied []access
		for _, a := range append(slices.Clone(reads), writes...) {
			if a.resource != "clustertrustbundles" {
				denied = append(denied, a)
			}
		}
		checkAllowedDenied(t, ctx, saKube, clusterTrustBundleReads(), denied)
	})

	// The component is applied only for this test: the package's other tests check the
	// ServiceAccount's rules without it. Removing it leaves manifests/ as cluster applied it.
	t.Cleanup(func() {
		ctx := context.Background()
		for _, err := range []error{
			adminKube.RbacV1().ClusterRoleBindings().Delete(ctx, podCertificateRole, metav1.DeleteOptions{}),
			adminKube.RbacV1().ClusterRoles().Delete(ctx, podCertificateRole, metav1.DeleteOptions{}),
			adminKube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, nodeOnlyPolicy, metav1.DeleteOptions{}),
			adminKube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, nodeOnlyPolicy, metav1.DeleteOptions{}),
			serverSideApply(ctx, admin, kustomize(t, "manifests")),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the component: %v", err)
			}
		}
		// The RBAC authorizer's cache forgets the binding a moment later.
		eventually(t, ctx, "the component's permissions to go", func() (bool, error) { return !selfReview(t, ctx, saKube, inForce), nil })
	})
	start := time.Now()
	checkApplied(t, kustomize(t, "test", "manifests", "testdata", "pod-certificates"))
	eventually(t, ctx, "the component's permissions", func() (bool, error) { return selfReview(t, ctx, saKube, inForce), nil })
	t.Logf("the component applied and in force after %v", time.Since(start).Round(time.Millisecond))

	t.Run("access reviews", func(t *testing.T) {
		checkAllowedDenied(t, ctx, saKube, append(slices.Clone(reads), writes...), podCertificateDenied())
	})
	t.Run("the base role's access reviews", func(t *testing.T) {
		checkAccessReviews(t, ctx, saConfig, serviceAccountReads()...)
	})
	t.Run("rules review", func(t *testing.T) {
		checkRulesReview(t, ctx, saConfig, wantPodCertificateRules...)
	})
	t.Run("status writes", func(t *testing.T) {
		checkStatusWrites(t, ctx, admin, adminKube, saKube)
	})
	t.Run("trust bundles", func(t *testing.T) {
		checkTrustBundleWrites(t, ctx, adminKube, saKube)
	})
}

// checkStatusWrites creates, as the pod's node, a pod certificate request for
// spire-registrar's signer and one for another, and issues a certificate for each as the
// ServiceAccount: only the first is taken. kube-apiserver checks sign after validating the
// status, so the certificates are valid and only the signer name differs. The admin, which
// the component's admission policy refuses, impersonates the node, keeping its own rights:
// no Node authorizer runs here.
func checkStatusWrites(t *testing.T, ctx context.Context, admin *rest.Config, adminKube, saKube kubernetes.Interface) {
	suffix := fmt.Sprint(podCertificateRuns.Add(1))
	ns := "pod-certificates-" + suffix
	if err := realcluster.EnsureNamespace(ctx, adminKube, ns); err != nil {
		t.Fatal(err)
	}
	sa, err := realcluster.EnsureServiceAccount(ctx, adminKube, ns, "default")
	if err != nil {
		t.Fatal(err)
	}
	node, err := realcluster.CreateNode(ctx, adminKube, "pod-certificates-node-"+suffix)
	if err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t)
	for _, tc := range []struct {
		signer string
		// says is what kube-apiserver's refusal says; "" if the write is allowed.
		says string
	}{
		{podCertificateSigner, ""},
		{otherSigner, `User "system:serviceaccount:` + namespace + `:` + serviceAccount + `" is not permitted to "sign" for signer "` + otherSigner + `"`},
	} {
		t.Run(tc.signer, func(t *testing.T) {
			proj := corev1.PodCertificateProjection{SignerName: tc.signer, KeyType: realcluster.KeyTypeECDSAP256, CredentialBundlePath: "credentials.pem"}
			pod, err := realcluster.CreatePod(ctx, adminKube, ns, "app-"+strings.NewReplacer("/", "-", ".", "-").Replace(tc.signer), node.Name,
				realcluster.WithPodCertificateVolume("svid", proj))
			if err != nil {
				t.Fatal(err)
			}
			asNode := rest.CopyConfig(admin)
			asNode.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node.Name, Groups: []string{"system:nodes", "system:masters"}}
			nodeKube, err := kubernetes.NewForConfig(asNode)
			if err != nil {
				t.Fatal(err)
			}
			opts := realcluster.ProjectionRequestOptions(&proj)
			opts.ServiceAccountUID, opts.LagTimeout = sa.UID, -1
			pcr, key, err := realcluster.RequestPodCertificate(ctx, nodeKube, pod, node, opts)
			if err != nil {
				t.Fatal(err)
			}
			pcrs := saKube.CertificatesV1().PodCertificateRequests(ns)

			// The request itself is the kubelet's: the signer may neither create nor change it.
			if _, err := pcrs.Create(ctx, pcr, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("creating a request as the ServiceAccount: %v, want Forbidden", err)
			}
			relabelled := pcr.DeepCopy()
			relabelled.Labels = map[string]string{"changed": "by-the-signer"}
			if _, err := pcrs.Update(ctx, relabelled, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("updating the request as the ServiceAccount: %v, want Forbidden", err)
			}

			issued := pcr.DeepCopy()
			issued.Status = ca.issuedStatus(t, key.Public())
			_, err = pcrs.UpdateStatus(ctx, issued, metav1.UpdateOptions{})
			if tc.says != "" {
				assertAPIError(t, err, http.StatusUnprocessableEntity, tc.says)
				return
			}
			if err != nil {
				t.Fatalf("issuing as the ServiceAccount: %v", err)
			}
			got, err := adminKube.CertificatesV1().PodCertificateRequests(ns).Get(ctx, pcr.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if outcome := realcluster.PodCertificateRequestOutcome(got); outcome != certificatesv1.PodCertificateRequestConditionTypeIssued {
				t.Errorf("request %s is %q after the ServiceAccount issued it", pcr.Name, outcome)
			}
		})
	}
}

// checkTrustBundleWrites writes ClusterTrustBundles as the ServiceAccount: its signer's are
// created, updated and deleted; another signer's are neither created nor updated
// (ClusterTrustBundleAttest). It also shows what RBAC and attest leave allowed, which the
// component's ClusterRole says: deleting another signer's bundle and writing a bundle
// without a signer name.
func checkTrustBundleWrites(t *testing.T, ctx context.Context, adminKube, saKube kubernetes.Interface) {
	suffix := fmt.Sprint(podCertificateRuns.Add(1))
	ca, rotated := newTestCA(t), newTestCA(t)
	bundle := func(name, signer string, cas ...*testCA) *certificatesv1.ClusterTrustBundle {
		var pems string
		for _, c := range cas {
			pems += c.pem()
		}
		return &certificatesv1.ClusterTrustBundle{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pems},
		}
	}
	ctbs := saKube.CertificatesV1().ClusterTrustBundles()
	adminCTBs := adminKube.CertificatesV1().ClusterTrustBundles()
	ours := bundleName("pod-certificates-" + suffix + ".example.org")
	theirs := strings.ReplaceAll(otherSigner, "/", ":") + ":pod-certificates-" + suffix
	signerless := "pod-certificates-signerless-" + suffix
	t.Cleanup(func() {
		for _, name := range []string{ours, theirs, signerless} {
			if err := adminCTBs.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting ClusterTrustBundle %s: %v", name, err)
			}
		}
	})

	t.Run("its own signer's", func(t *testing.T) {
		created, err := ctbs.Create(ctx, bundle(ours, podCertificateSigner, ca), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s: %v", ours, err)
		}
		// A CA rotation: the new authority is published beside the old one.
		created.Spec.TrustBundle = ca.pem() + rotated.pem()
		if _, err := ctbs.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating %s: %v", ours, err)
		}
		list, err := ctbs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + podCertificateSigner})
		if err != nil {
			t.Fatalf("listing the signer's bundles: %v", err)
		}
		if !slices.ContainsFunc(list.Items, func(b certificatesv1.ClusterTrustBundle) bool { return b.Name == ours }) {
			t.Errorf("the field selector's list lacks %s", ours)
		}
		if err := ctbs.Delete(ctx, ours, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s: %v", ours, err)
		}
	})

	t.Run("another signer's", func(t *testing.T) {
		const says = `user not permitted to attest for signerName "` + otherSigner + `"`
		_, err := ctbs.Create(ctx, bundle(theirs, otherSigner, ca), metav1.CreateOptions{})
		assertAPIError(t, err, http.StatusForbidden, says)
		created, err := adminCTBs.Create(ctx, bundle(theirs, otherSigner, ca), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Spec.TrustBundle = rotated.pem()
		_, err = ctbs.Update(ctx, created, metav1.UpdateOptions{})
		assertAPIError(t, err, http.StatusForbidden, says)
	})

	t.Run("what RBAC cannot keep it from", func(t *testing.T) {
		if err := ctbs.Delete(ctx, theirs, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting another signer's bundle: %v; if kube-apiserver now refuses it, say so in the component's ClusterRole", err)
		}
		if _, err := ctbs.Create(ctx, bundle(signerless, "", ca), metav1.CreateOptions{}); err != nil {
			t.Errorf("creating a bundle without a signer name: %v; if kube-apiserver now refuses it, say so in the component's ClusterRole", err)
		}
	})
}

// assertAPIError fails the test unless err is an API error with code whose message contains says.
func assertAPIError(t *testing.T, err error, code int32, says string) {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("error %v, want HTTP %d saying %q", err, code, says)
	}
	if got := status.Status(); got.Code != code || !strings.Contains(got.Message, says) {
		t.Fatalf("HTTP %d %q, want HTTP %d saying %q", got.Code, got.Message, code, says)
	}
}

// testCA is a self-signed CA: its certificate is a valid trust anchor for a ClusterTrustBundle,
// and the certificates it issues pass kube-apiserver's validation of a request's status.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "pod certificates test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

// pem is the CA certificate as one PEM block.
func (ca *testCA) pem() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
}

// issuedStatus returns an Issued status for a request whose key is pub, within
// kube-apiserver's rules: a two-hour certificate from now (at least an hour, at most the
// default maxExpirationSeconds), to be refreshed after one hour (at least 10 minutes from
// either end), with the leaf's own times.
func (ca *testCA) issuedStatus(t *testing.T, pub crypto.PublicKey) certificatesv1.PodCertificateRequestStatus {
	t.Helper()
	notBefore := time.Now().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(notBefore.UnixNano()),
		NotBefore:    notBefore, NotAfter: notBefore.Add(2 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{
			Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued by the test", LastTransitionTime: metav1.Now(),
		}},
		CertificateChain: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) + ca.pem(),
		NotBefore:        ptr.To(metav1.NewTime(notBefore)),
		NotAfter:         ptr.To(metav1.NewTime(notBefore.Add(2 * time.Hour))),
		BeginRefreshAt:   ptr.To(metav1.NewTime(notBefore.Add(time.Hour))),
	}
}
