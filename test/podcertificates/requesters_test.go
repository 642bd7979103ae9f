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

package podcertificates

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/spire-registrar/spire-registrar/pkg/controller/podcertificate"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// nodeOnlyPolicyName names the admission policy of manifests/pod-certificates and its binding.
const nodeOnlyPolicyName = "spire-registrar-pod-certificates-node-only"

// applyNodeOnlyPolicy creates the admission policy and binding of manifests/pod-certificates
// as an operator applies them, and waits until kube-apiserver enforces them: it refuses an
// admin's dry-run request for the signer.
func applyNodeOnlyPolicy(t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	data, err := os.ReadFile(filepath.Join("..", "..", podcertificate.NodeOnlyPolicyManifest))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if len(docs) != 2 || yaml.UnmarshalStrict([]byte(docs[0]), &policy) != nil || yaml.UnmarshalStrict([]byte(docs[1]), &binding) != nil {
		t.Fatalf("%s is not a ValidatingAdmissionPolicy and its binding", podcertificate.NodeOnlyPolicyManifest)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	probe := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "probe-"},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: signerName, PodName: "probe", PodUID: "00000000-0000-0000-0000-00000000000a",
			ServiceAccountName: "default", ServiceAccountUID: "00000000-0000-0000-0000-00000000000b",
			NodeName: nodeName, NodeUID: "00000000-0000-0000-0000-00000000000c", StubPKCS10Request: csr,
		},
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CertificatesV1().PodCertificateRequests(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), nodeOnlyPolicyName), nil
	})
	if err != nil {
		t.Fatalf("kube-apiserver does not enforce %s within 30s: %v", nodeOnlyPolicyName, err)
	}
}

// as returns a client that acts as user, by impersonation.
func (w *world) as(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(w.stack.Kube.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOnlyThePodsNodeGetsACertificate: with manifests/pod-certificates' admission policy, a
// certificate goes only to the pod's own node. A user allowed to create PodCertificateRequests
// and to read pods in the pod's namespace, who can so name the pod with every UID, is refused
// at admission; so is another node; and a pod being deleted gets none. The pod's node, asking
// as its kubelet would, is the control.
func TestOnlyThePodsNodeGetsACertificate(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{})
	w.startReady(t)
	ctx := t.Context()
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	web := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
	w.waitEntry(t, saID("web"), true)
	webSA, err := w.admin.CoreV1().ServiceAccounts(namespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("world ready in %s", time.Since(start).Round(time.Millisecond))

	t.Run("control: the pod's node", func(t *testing.T) {
		pcr, _ := w.request(t, web, realcluster.PodCertificateRequestOptions{})
		if o := realcluster.PodCertificateRequestOutcome(w.waitEnded(t, pcr)); o != certificatesv1.PodCertificateRequestConditionTypeIssued {
			t.Fatalf("request of the pod's node %s, want Issued", o)
		}
	})

	t.Run("a user who may create requests and read pods", func(t *testing.T) {
		const user = "alice"
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "request-certificates"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"podcertificaterequests"}, Verbs: []string{"create"}},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			},
		}
		if _, err := w.admin.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "request-certificates"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		alice := w.as(t, user)
		// What she needs to name the pod: its name, UID, node; the node's UID is public in
		// the pod's node name and the request needs only a plausible one, which the signer
		// compares with the node's. She is given the real ones, as the strongest attacker.
		var seen *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			seen, err = alice.CoreV1().Pods(namespace).Get(ctx, web.Name, metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("alice cannot read the pod: %v", err)
		}
		pcr, _, err := realcluster.RequestPodCertificate(ctx, alice, seen, w.node, realcluster.PodCertificateRequestOptions{
			SignerName: signerName, ServiceAccountUID: webSA.UID, LagTimeout: -1,
		})
		if err == nil {
			got := w.waitEnded(t, pcr)
			t.Fatalf("alice's request for pod %s was admitted and is %s", web.Name, realcluster.PodCertificateRequestOutcome(got))
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), nodeOnlyPolicyName) ||
			!strings.Contains(err.Error(), "only system:node:"+nodeName+", the node of pod web-0, may request its certificate") {
			t.Fatalf("alice's request refused with %v, want Forbidden by %s, naming the node", err, nodeOnlyPolicyName)
		}
		t.Logf("refused at admission: %v", err)
	})

	t.Run("another node", func(t *testing.T) {
		other, err := realcluster.CreateNode(ctx, w.admin, "node-2")
		if err != nil {
			t.Fatal(err)
		}
		asOther, err := w.stack.Kube.NodeClient(other.Name)
		if err != nil {
			t.Fatal(err)
		}
		// Naming the pod's node, as the pod's kubelet would, or itself: refused either way.
		for _, named := range []*corev1.Node{w.node, other} {
			pcr, _, err := realcluster.RequestPodCertificate(ctx, asOther, web, named, realcluster.PodCertificateRequestOptions{
				SignerName: signerName, ServiceAccountUID: webSA.UID, LagTimeout: -1,
			})
			if err == nil {
				got := w.waitEnded(t, pcr)
				t.Fatalf("node-2's request naming %s was admitted and is %s", named.Name, realcluster.PodCertificateRequestOutcome(got))
			}
			if !apierrors.IsForbidden(err) {
				t.Errorf("node-2's request naming %s refused with %v, want Forbidden", named.Name, err)
			}
			t.Logf("naming %s: refused at admission: %v", named.Name, err)
		}
	})

	t.Run("a pod being deleted", func(t *testing.T) {
		leaving := w.createPod(t, "leaving-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
		// A finalizer keeps the pod, with its deletionTimestamp, as a kubelet does while
		// its containers stop.
		leaving.Finalizers = []string{"example.com/hold"}
		if _, err := w.admin.CoreV1().Pods(namespace).Update(ctx, leaving, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if p, err := w.admin.CoreV1().Pods(namespace).Get(context.Background(), leaving.Name, metav1.GetOptions{}); err == nil {
				p.Finalizers = nil
				_, _ = w.admin.CoreV1().Pods(namespace).Update(context.Background(), p, metav1.UpdateOptions{})
			}
		})
		if err := w.admin.CoreV1().Pods(namespace).Delete(ctx, leaving.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		pcr, _ := w.request(t, leaving, realcluster.PodCertificateRequestOptions{})
		got := w.waitEnded(t, pcr)
		cond := meta.FindStatusCondition(got.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeDenied)
		if cond == nil || cond.Reason != "PodDeleting" || !strings.Contains(cond.Message, `pod "default"/"leaving-0" is being deleted`) {
			t.Fatalf("request for a pod being deleted %s, want Denied PodDeleting: %+v", realcluster.PodCertificateRequestOutcome(got), got.Status.Conditions)
		}
		t.Logf("Denied, %s: %s", cond.Reason, cond.Message)
	})
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}

// TestRegistrarWithoutTheNodeOnlyPolicy: without the admission policy of
// manifests/pod-certificates, anyone allowed to create PodCertificateRequests could take a
// pod's identity, so spire-registrar refuses to start and names the fix. Told that every
// creator is trusted (podCertificates.trustNonNodeRequesters), it starts, and checks an admin's
// requests itself: one that matches the pod, its node, its service account and its volume is
// issued; one that differs in any of them is denied.
func TestRegistrarWithoutTheNodeOnlyPolicy(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{noNodeOnlyPolicy: true})
	refused := w.start(t)
	select {
	case <-refused.Done():
	case <-time.After(time.Minute):
		t.Fatal("spire-registrar still runs a minute after its start, with no node-only admission policy")
	}
	if refused.Err() == nil {
		t.Fatalf("spire-registrar exited with status 0:\n%s", refused.Logs())
	}
	out := refused.Logs()
	last := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	for _, want := range []string{podcertificate.NodeOnlyPolicyManifest, "podCertificates.trustNonNodeRequesters", signerName} {
		if !strings.Contains(last, want) {
			t.Errorf("the last line of its output does not name %q:\n%s", want, last)
		}
	}
	t.Logf("without the policy, spire-registrar exited (%v), saying:\n%s", refused.Err(), last)

	w.opts.trustNonNodeRequesters = true
	w.startReady(t)
	ctx := t.Context()
	w.createClusterSPIFFEID(t, "web", podIdentity("web"))
	web := w.createPod(t, "web-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"}})
	unmounted := w.createPod(t, "unmounted-0", podOptions{serviceAccount: "web", labels: map[string]string{"app": "web"},
		projection: func(p *corev1.PodCertificateProjection) { p.SignerName = "example.com/other" }})
	w.waitEntry(t, saID("web"), true)
	webSA, err := w.admin.CoreV1().ServiceAccounts(namespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	otherNode := w.node.DeepCopy()
	otherNode.UID = "00000000-0000-0000-0000-000000000001"
	replaced := web.DeepCopy()
	replaced.UID = "00000000-0000-0000-0000-000000000002"
	t.Logf("world ready in %s", time.Since(start).Round(time.Millisecond))

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node // default the pod's
		opts realcluster.PodCertificateRequestOptions
		// reason is the Denied condition's, "" for Issued; says are what its message must name.
		reason string
		says   []string
	}{
		{name: "control: all as the pod's kubelet would ask", pod: web},
		{name: "a wrong service account UID", pod: web, opts: realcluster.PodCertificateRequestOptions{ServiceAccountUID: "00000000-0000-0000-0000-000000000003"},
			reason: "PodMismatch", says: []string{`spec.serviceAccountUID is "00000000-0000-0000-0000-000000000003", the service account's UID is "` + string(webSA.UID) + `"`}},
		{name: "a wrong node UID", pod: web, node: otherNode,
			reason: "PodMismatch", says: []string{`spec.nodeUID is "` + string(otherNode.UID) + `", the node's UID is "` + string(w.node.UID) + `"`}},
		{name: "a wrong pod UID", pod: replaced,
			reason: "PodMismatch", says: []string{`spec.podUID is "` + string(replaced.UID) + `", the pod's UID is "` + string(web.UID) + `"`}},
		{name: "a pod with no volume for the signer", pod: unmounted,
			reason: "NoPodCertificateVolume", says: []string{`pod "default"/"unmounted-0" mounts no podCertificate volume for signer "` + signerName + `"`}},
		{name: "user annotations the volume does not have", pod: web,
			opts:   realcluster.PodCertificateRequestOptions{UnverifiedUserAnnotations: map[string]string{"spire.spiffe.io/clusterspiffeid": "web"}},
			reason: "NoPodCertificateVolume", says: []string{`user annotations {"spire.spiffe.io/clusterspiffeid"="web"}`}},
		{name: "a lifetime the volume does not ask", pod: web,
			opts:   realcluster.PodCertificateRequestOptions{MaxExpirationSeconds: new(int32(7200))},
			reason: "NoPodCertificateVolume", says: []string{"maxExpirationSeconds 7200", "its volumes for the signer have maxExpirationSeconds 86400"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.SignerName, opts.LagTimeout = signerName, -1
			if opts.ServiceAccountUID == "" {
				opts.ServiceAccountUID = webSA.UID
			}
			node := tc.node
			if node == nil {
				node = w.node
			}
			pcr, _, err := realcluster.RequestPodCertificate(ctx, w.admin, tc.pod, node, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := w.waitEnded(t, pcr)
			outcome := realcluster.PodCertificateRequestOutcome(got)
			if tc.reason == "" {
				if outcome != certificatesv1.PodCertificateRequestConditionTypeIssued {
					t.Fatalf("request %s, want Issued: %+v", outcome, got.Status.Conditions)
				}
				return
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, certificatesv1.PodCertificateRequestConditionTypeDenied)
			if cond == nil || got.Status.CertificateChain != "" {
				t.Fatalf("request %s, want Denied: %+v", outcome, got.Status.Conditions)
			}
			if cond.Reason != tc.reason {
				t.Errorf("reason %s, want %s (message %q)", cond.Reason, tc.reason, cond.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(cond.Message, s) {
					t.Errorf("message %q does not say %q", cond.Message, s)
				}
			}
			t.Logf("Denied, %s: %s", cond.Reason, cond.Message)
		})
	}
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
