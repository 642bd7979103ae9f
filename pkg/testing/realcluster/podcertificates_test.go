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
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const (
	testSigner     = "example.org/test-signer"
	testSignerUser = "test-signer"
)

// TestNodeAuthorizationPodCertificates proves the harness's kubelet emulation
// against a real kube-apiserver with the Node authorizer and NodeRestriction:
// the pod's node may request a certificate for it, other nodes and false
// claims are refused, and only a user who may "sign" for the signer may write
// a request's status, which must satisfy kube-apiserver's validation.
func TestNodeAuthorizationPodCertificates(t *testing.T) {
	skipIfShort(t)
	ctx := t.Context()
	kube := NewKube(t, KubeOptions{NodeAuthorization: true})
	admin, err := kube.Client()
	if err != nil {
		t.Fatal(err)
	}

	const ns = "pcr"
	if err := EnsureNamespace(ctx, admin, ns); err != nil {
		t.Fatal(err)
	}
	sa, err := EnsureServiceAccount(ctx, admin, ns, "default")
	if err != nil {
		t.Fatal(err)
	}
	nodeA, err := CreateNode(ctx, admin, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	nodeB, err := CreateNode(ctx, admin, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	proj := corev1.PodCertificateProjection{SignerName: testSigner, KeyType: KeyTypeECDSAP256, CredentialBundlePath: "credentialbundle.pem"}
	pod, err := CreatePod(ctx, admin, ns, "app", nodeA.Name, WithPodCertificateVolume("svid", proj))
	if err != nil {
		t.Fatal(err)
	}
	asNodeA, err := kube.NodeClient(nodeA.Name)
	if err != nil {
		t.Fatal(err)
	}
	asNodeB, err := kube.NodeClient(nodeB.Name)
	if err != nil {
		t.Fatal(err)
	}

	// Created first, with retries for informer lag: once it is admitted, the
	// admission plugin's informers have the node, the pod and the service
	// account, so the refusals below are the ones meant to stick.
	start := time.Now()
	pcr, key, err := RequestPodCertificate(ctx, asNodeA, pod, nodeA, ProjectionRequestOptions(&proj))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first pod certificate request admitted %s after the pod was created", time.Since(start).Round(time.Millisecond))

	t.Run("served without flags", func(t *testing.T) {
		res, err := admin.Discovery().ServerResourcesForGroupVersion("certificates.k8s.io/v1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range res.APIResources {
			names = append(names, r.Name)
		}
		for _, want := range []string{"podcertificaterequests", "podcertificaterequests/status", "clustertrustbundles"} {
			if !slices.Contains(names, want) {
				t.Errorf("certificates.k8s.io/v1 serves %v, without %s", names, want)
			}
		}
	})

	t.Run("node identity", func(t *testing.T) {
		review, err := asNodeA.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u := review.Status.UserInfo; u.Username != "system:node:node-a" || !slices.Contains(u.Groups, NodesGroup) {
			t.Fatalf("node-a's client is %q in %v", u.Username, u.Groups)
		}
		if _, err := (&Kube{}).NodeRESTConfig("x"); err == nil {
			t.Fatal("NodeRESTConfig without NodeAuthorization: no error")
		}
	})

	t.Run("request as the kubelet makes it", func(t *testing.T) {
		if !strings.HasPrefix(pcr.Name, "req-") || pcr.GenerateName != "req-" {
			t.Errorf("name %q, generateName %q; the kubelet uses generateName req-", pcr.Name, pcr.GenerateName)
		}
		wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
		if !equalOwners(pcr.OwnerReferences, wantOwner) {
			t.Errorf("owner references %+v, want %+v", pcr.OwnerReferences, wantOwner)
		}
		s := pcr.Spec
		if s.SignerName != testSigner || s.PodName != pod.Name || s.PodUID != pod.UID || s.ServiceAccountName != "default" ||
			s.ServiceAccountUID != sa.UID || string(s.NodeName) != nodeA.Name || s.NodeUID != nodeA.UID {
			t.Errorf("spec %+v does not name the pod, its service account and its node", s)
		}
		if s.MaxExpirationSeconds == nil || *s.MaxExpirationSeconds != 86400 {
			t.Errorf("maxExpirationSeconds %v, want kube-apiserver's default 86400", s.MaxExpirationSeconds)
		}
		csr, err := x509.ParseCertificateRequest(s.StubPKCS10Request)
		if err != nil {
			t.Fatal(err)
		}
		if csr.Subject.String() != "" || len(csr.Extensions) != 0 || len(csr.DNSNames)+len(csr.URIs) != 0 {
			t.Errorf("stub CSR has subject %q, %d extensions", csr.Subject, len(csr.Extensions))
		}
		if pub, ok := csr.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(key.Public()) || pub.Curve != elliptic.P256() {
			t.Errorf("stub CSR's key %T is not the returned P-256 key", csr.PublicKey)
		}
		if PodCertificateRequestOutcome(pcr) != "" || len(pcr.Status.Conditions) != 0 {
			t.Errorf("new request has status %+v", pcr.Status)
		}
	})

	t.Run("key types", func(t *testing.T) {
		for _, kt := range []string{KeyTypeRSA3072, KeyTypeECDSAP384, KeyTypeECDSAP521, KeyTypeED25519} {
			// kube-apiserver checks each stub CSR's key type, size and signature.
			if _, key, err := RequestPodCertificate(ctx, asNodeA, pod, nodeA, PodCertificateRequestOptions{SignerName: testSigner, KeyType: kt}); err != nil {
				t.Errorf("%s: %v", kt, err)
			} else if key == nil {
				t.Errorf("%s: no key", kt)
			}
		}
		if _, _, err := RequestPodCertificate(ctx, asNodeA, pod, nodeA, PodCertificateRequestOptions{SignerName: testSigner, KeyType: "RSA2048"}); err == nil {
			t.Error("RSA2048: no error")
		}
	})

	t.Run("refused", func(t *testing.T) {
		wrongUID := nodeA.DeepCopy()
		wrongUID.UID = "00000000-0000-0000-0000-000000000000"
		once := PodCertificateRequestOptions{SignerName: testSigner, ServiceAccountUID: sa.UID, LagTimeout: -1}
		otherSigner := once
		otherSigner.SignerName = "example.org/not-mounted"
		for _, tc := range []struct {
			name   string
			client kubernetes.Interface
			node   *corev1.Node
			opts   PodCertificateRequestOptions
			code   int32
			says   string
		}{
			{"another node for the pod", asNodeB, nodeB, once, http.StatusForbidden, `pod "pcr/app" is not running on node "node-b"`},
			{"another node naming the pod's node", asNodeB, nodeA, once, http.StatusForbidden, `which is not the requesting node "node-b"`},
			{"a wrong node UID", asNodeA, wrongUID, once, http.StatusInternalServerError, "inconsistent with the running node"},
			{"a signer no volume of the pod names", asNodeA, nodeA, otherSigner, http.StatusForbidden, "does not mount a podCertificate projected volume"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, _, err := RequestPodCertificate(ctx, tc.client, pod, tc.node, tc.opts)
				assertStatusError(t, err, tc.code, tc.says)
			})
		}
		t.Run("another node reading the pod's service account", func(t *testing.T) {
			_, _, err := RequestPodCertificate(ctx, asNodeB, pod, nodeB, PodCertificateRequestOptions{SignerName: testSigner, LagTimeout: -1})
			assertStatusError(t, err, http.StatusForbidden, "no relationship found between node 'node-b' and this object")
		})
		t.Run("the pod's node reading another's status", func(t *testing.T) {
			_, err := asNodeA.CertificatesV1().PodCertificateRequests(ns).UpdateStatus(ctx, pcr, metav1.UpdateOptions{})
			assertStatusError(t, err, http.StatusForbidden, "nodes may not access the status subresource")
		})
	})

	t.Run("status", func(t *testing.T) {
		testPodCertificateStatus(t, kube, admin, pcr, key)
	})
}

// testPodCertificateStatus checks, as a signer would meet them, kube-apiserver's
// rules for a request's status: who may write it (update on the status
// subresource and "sign" on the signer) and what it must hold.
func testPodCertificateStatus(t *testing.T, kube *Kube, admin kubernetes.Interface, pcr *certificatesv1.PodCertificateRequest, key crypto.Signer) {
	ctx := t.Context()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "pcr-status-writer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"podcertificaterequests"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"podcertificaterequests/status"}, Verbs: []string{"update", "patch"}},
		},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pcr-status-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: testSignerUser}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := kube.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: testSignerUser}
	signer, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ca := newFakeCA(t)
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	issued := func(nb time.Time, lifetime, refreshAfter time.Duration) *certificatesv1.PodCertificateRequest {
		chain, leaf := ca.issue(t, csr.PublicKey, nb, lifetime)
		return withStatus(pcr, issuedStatus(chain, leaf.NotBefore, leaf.NotAfter, leaf.NotBefore.Add(refreshAfter)))
	}
	valid := issued(now, 2*time.Hour, time.Hour)
	pcrs := signer.CertificatesV1().PodCertificateRequests(pcr.Namespace)

	t.Run("refused without sign", func(t *testing.T) {
		// 403 until RBAC has the binding, then validation's 422.
		var last error
		err := wait.PollUntilContextTimeout(ctx, readyPollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, last = pcrs.UpdateStatus(ctx, valid, metav1.UpdateOptions{})
			return !apierrors.IsForbidden(last), nil
		})
		if err != nil {
			t.Fatalf("still %v: %v", last, err)
		}
		assertStatusError(t, last, http.StatusUnprocessableEntity, `User "test-signer" is not permitted to "sign" for signer "example.org/test-signer"`)
	})

	t.Run("invalid statuses", func(t *testing.T) {
		otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		otherChain, otherLeaf := ca.issue(t, otherKey.Public(), now, 2*time.Hour)
		chain, leaf := ca.issue(t, csr.PublicKey, now, 2*time.Hour)
		for _, tc := range []struct {
			name string
			req  *certificatesv1.PodCertificateRequest
			says string
		}{
			{"a chain without the Issued condition",
				withStatus(pcr, certificatesv1.PodCertificateRequestStatus{CertificateChain: chain}),
				`status is immutable unless transitioning to "Issued", "Denied", or "Failed"`},
			{"an Issued condition that is not True",
				withStatus(pcr, func() certificatesv1.PodCertificateRequestStatus {
					s := issuedStatus(chain, leaf.NotBefore, leaf.NotAfter, leaf.NotBefore.Add(time.Hour))
					s.Conditions[0].Status = metav1.ConditionFalse
					return s
				}()),
				"Unsupported value"},
			{"Issued and Denied at once",
				withStatus(pcr, func() certificatesv1.PodCertificateRequestStatus {
					s := issuedStatus(chain, leaf.NotBefore, leaf.NotAfter, leaf.NotBefore.Add(time.Hour))
					s.Conditions = append(s.Conditions, condition(certificatesv1.PodCertificateRequestConditionTypeDenied, "Test"))
					return s
				}()),
				"There may be at most one condition"},
			{"Denied with a chain",
				withStatus(pcr, certificatesv1.PodCertificateRequestStatus{
					Conditions:       []metav1.Condition{condition(certificatesv1.PodCertificateRequestConditionTypeDenied, "Test")},
					CertificateChain: chain,
				}),
				"non-condition status fields must be empty"},
			{"a leaf for another key",
				withStatus(pcr, issuedStatus(otherChain, otherLeaf.NotBefore, otherLeaf.NotAfter, otherLeaf.NotBefore.Add(time.Hour))),
				"leaf certificate was not issued to the requested public key"},
			{"no beginRefreshAt",
				withStatus(pcr, func() certificatesv1.PodCertificateRequestStatus {
					s := issuedStatus(chain, leaf.NotBefore, leaf.NotAfter, leaf.NotBefore.Add(time.Hour))
					s.BeginRefreshAt = nil
					return s
				}()),
				"status.beginRefreshAt: Required value"},
			{"notBefore other than the leaf's",
				withStatus(pcr, issuedStatus(chain, leaf.NotBefore.Add(time.Second), leaf.NotAfter, leaf.NotBefore.Add(time.Hour))),
				"must be set to the NotBefore time encoded in the leaf certificate"},
			{"notAfter other than the leaf's",
				withStatus(pcr, issuedStatus(chain, leaf.NotBefore, leaf.NotAfter.Add(-time.Second), leaf.NotBefore.Add(time.Hour))),
				"must be set to the NotAfter time encoded in the leaf certificate"},
			{"notBefore more than 5 minutes ago", issued(now.Add(-6*time.Minute), 2*time.Hour, time.Hour),
				"must be set to within 5 minutes of kube-apiserver's current time"},
			{"notBefore more than 5 minutes ahead", issued(now.Add(6*time.Minute), 2*time.Hour, time.Hour),
				"must be set to within 5 minutes of kube-apiserver's current time"},
			{"a lifetime under an hour", issued(now, 59*time.Minute, 20*time.Minute),
				"leaf certificate lifetime must be >= 1 hour"},
			{"a lifetime over maxExpirationSeconds", issued(now, 24*time.Hour+time.Second, time.Hour),
				"leaf certificate lifetime must be <= spec.maxExpirationSeconds (86400)"},
			{"beginRefreshAt under 10 minutes after notBefore", issued(now, 2*time.Hour, 10*time.Minute-time.Second),
				"must be at least 10 minutes after status.notBefore"},
			{"beginRefreshAt under 10 minutes before notAfter", issued(now, 2*time.Hour, 110*time.Minute+time.Second),
				"must be at least 10 minutes before status.notAfter"},
			{"a block other than CERTIFICATE after the leaf",
				withStatus(pcr, issuedStatus(chain+string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})), leaf.NotBefore, leaf.NotAfter, leaf.NotBefore.Add(time.Hour))),
				"issued certificate chain must consist entirely of CERTFICATE PEM blocks"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				// Validation runs before the sign check: these need no sign.
				_, err := pcrs.UpdateStatus(ctx, tc.req, metav1.UpdateOptions{})
				assertStatusError(t, err, http.StatusUnprocessableEntity, tc.says)
			})
		}
		t.Run("the bounds themselves", func(t *testing.T) {
			// Exactly an hour, refresh exactly 10 minutes after notBefore: allowed,
			// shown with a dry run so that the request stays pending.
			if _, err := admin.CertificatesV1().PodCertificateRequests(pcr.Namespace).UpdateStatus(ctx, issued(now, time.Hour, 10*time.Minute), metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("one hour, refresh at notBefore+10m: %v", err)
			}
			if _, err := admin.CertificatesV1().PodCertificateRequests(pcr.Namespace).UpdateStatus(ctx, issued(now, 24*time.Hour, 24*time.Hour-10*time.Minute), metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("maxExpirationSeconds, refresh at notAfter-10m: %v", err)
			}
		})
	})

	t.Run("allowed with sign", func(t *testing.T) {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{
			APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{testSigner}, Verbs: []string{"sign"},
		})
		if _, err := admin.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var last error
		err := wait.PollUntilContextTimeout(ctx, readyPollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, last = pcrs.UpdateStatus(ctx, valid, metav1.UpdateOptions{})
			return last == nil, nil
		})
		if err != nil {
			t.Fatalf("still %v: %v", last, err)
		}
		got, err := WaitPodCertificateIssued(ctx, admin, pcr.Namespace, pcr.Name)
		if err != nil {
			t.Fatal(err)
		}
		if PodCertificateRequestOutcome(got) != certificatesv1.PodCertificateRequestConditionTypeIssued {
			t.Fatalf("outcome %q", PodCertificateRequestOutcome(got))
		}
		block, _ := pem.Decode([]byte(got.Status.CertificateChain))
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !key.Public().(*ecdsa.PublicKey).Equal(leaf.PublicKey) {
			t.Error("issued leaf does not hold the request's key")
		}
		later := withStatus(got, *got.Status.DeepCopy())
		later.Status.BeginRefreshAt = ptr.To(metav1.NewTime(got.Status.BeginRefreshAt.Add(time.Minute)))
		_, err = pcrs.UpdateStatus(ctx, later, metav1.UpdateOptions{})
		assertStatusError(t, err, http.StatusUnprocessableEntity, "immutable after PodCertificateRequest is issued, denied, or failed")
	})

	t.Run("denied", func(t *testing.T) {
		pod, err := admin.CoreV1().Pods(pcr.Namespace).Get(ctx, pcr.Spec.PodName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node, err := admin.CoreV1().Nodes().Get(ctx, string(pcr.Spec.NodeName), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		asNode, err := kube.NodeClient(node.Name)
		if err != nil {
			t.Fatal(err)
		}
		req, _, err := RequestPodCertificate(ctx, asNode, pod, node, PodCertificateRequestOptions{SignerName: testSigner, KeyType: KeyTypeED25519})
		if err != nil {
			t.Fatal(err)
		}
		deny := withStatus(req, certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{
			condition(certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionUnsupportedKeyType),
		}})
		if _, err := pcrs.UpdateStatus(ctx, deny, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := WaitPodCertificateIssued(ctx, admin, req.Namespace, req.Name)
		if err != nil {
			t.Fatal(err)
		}
		if o := PodCertificateRequestOutcome(got); o != certificatesv1.PodCertificateRequestConditionTypeDenied {
			t.Fatalf("outcome %q, want Denied", o)
		}
	})
}

// assertStatusError fails the test unless err is an API error with code whose
// message contains says.
func assertStatusError(t *testing.T, err error, code int32, says string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want HTTP %d saying %q", code, says)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("error %v is no API status, want HTTP %d", err, code)
	}
	if got := status.Status(); got.Code != code || !strings.Contains(got.Message, says) {
		t.Fatalf("HTTP %d %q, want HTTP %d saying %q", got.Code, got.Message, code, says)
	}
}

func equalOwners(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			x.Controller == nil && x.BlockOwnerDeletion == nil
	})
}

// withStatus returns a copy of pcr with status s.
func withStatus(pcr *certificatesv1.PodCertificateRequest, s certificatesv1.PodCertificateRequestStatus) *certificatesv1.PodCertificateRequest {
	out := pcr.DeepCopy()
	out.Status = s
	return out
}

func condition(typ, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: "set by the test", LastTransitionTime: metav1.Now()}
}

// issuedStatus is an Issued status with chain and the given times.
func issuedStatus(chain string, notBefore, notAfter, beginRefreshAt time.Time) certificatesv1.PodCertificateRequestStatus {
	return certificatesv1.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{condition(certificatesv1.PodCertificateRequestConditionTypeIssued, "Issued")},
		CertificateChain: chain,
		NotBefore:        ptr.To(metav1.NewTime(notBefore)),
		NotAfter:         ptr.To(metav1.NewTime(notAfter)),
		BeginRefreshAt:   ptr.To(metav1.NewTime(beginRefreshAt)),
	}
}

// fakeCA signs leaves for the status tests; kube-apiserver checks only that
// the chain parses and that the leaf holds the request's key.
type fakeCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newFakeCA(t *testing.T) *fakeCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake pod certificate CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
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
	return &fakeCA{cert: cert, key: key}
}

// issue returns a chain (leaf, then the CA) whose leaf holds pub and is valid
// from notBefore for lifetime, and the leaf.
func (ca *fakeCA) issue(t *testing.T, pub crypto.PublicKey, notBefore time.Time, lifetime time.Duration) (string, *x509.Certificate) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		NotBefore:    notBefore, NotAfter: notBefore.Add(lifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})...)
	return string(chain), leaf
}
