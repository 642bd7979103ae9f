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

package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestWebhookThroughTheAPIServer runs the webhook against a real spire-server and
// kube-apiserver: the certificate is minted by SPIRE, the caBundle is written by the webhook,
// and the API server calls it, admitting a good ClusterSPIFFEID and denying a bad one with
// the webhook's message.
func TestWebhookThroughTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real kube-apiserver and spire-server; skipped with -short")
	}
	stack := realcluster.NewStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	client, err := spire.Dial(ctx, stack.SPIRE.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	var calls atomic.Int32
	hook, _ := serveThroughAPIServer(t, ctx, stack, client, Validators{
		ClusterSPIFFEID: func(o *spirev1alpha1.ClusterSPIFFEID) field.ErrorList {
			calls.Add(1)
			if o.Spec.Hint == "deny-me" {
				return field.ErrorList{field.Invalid(field.NewPath("spec", "hint"), o.Spec.Hint, "refused by the test's validator")}
			}
			return nil
		},
		ClusterFederatedTrustDomain: func(*spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList { return nil },
	})

	// The webhook writes SPIRE's authorities into both caBundles.
	authorities, err := client.Authority().X509Authorities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := encodeCABundle(authorities)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := stack.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "spire-webhook", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, hook := range got.Webhooks {
			if !bytes.Equal(hook.ClientConfig.CABundle, want) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("caBundle never became SPIRE's authorities: %v", err)
	}
	// Ready follows the write the API server has just shown.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return hook.Ready(), nil
	}); err != nil {
		t.Error("Ready() stayed false after the caBundle was written")
	}

	// The serving certificate chains to SPIRE's authorities and carries the SPIFFE ID.
	cert, err := hook.cert.get(nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	for _, a := range authorities {
		pool.AddCert(a)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool}); err != nil {
		t.Errorf("serving certificate does not verify for localhost against SPIRE's bundle: %v", err)
	}
	if len(cert.Leaf.URIs) != 1 || cert.Leaf.URIs[0].String() != "spiffe://"+stack.SPIRE.TrustDomain()+"/spire-controller-manager-webhook" {
		t.Errorf("certificate URIs %v", cert.Leaf.URIs)
	}

	// The API server calls the webhook; it may take a moment to see the new caBundle.
	good := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "good"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}"}}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, good, metav1.CreateOptions{})
		if err != nil {
			t.Logf("create good ClusterSPIFFEID: %v", err)
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("a valid ClusterSPIFFEID was never admitted: %v", err)
	}
	bad := &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/x", Hint: "deny-me"}}
	_, err = stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, bad, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.hint") || !strings.Contains(err.Error(), "refused by the test's validator") {
		t.Fatalf("bad ClusterSPIFFEID: got %v, want the webhook's denial naming spec.hint", err)
	}
	if calls.Load() < 2 {
		t.Errorf("the validator was called %d times, want at least 2", calls.Load())
	}
}

// serveThroughAPIServer runs a webhook with validators on a free port, its certificate minted
// by the stack's SPIRE through client, and registers it with the stack's kube-apiserver for
// both kinds, failing closed. The webhook stops when the test ends.
func serveThroughAPIServer(t *testing.T, ctx context.Context, stack *realcluster.Stack, client *spire.Client, validators Validators) (*Webhook, int) {
	t.Helper()
	port := freePort(t)
	hook, stop := startWebhookOn(t, ctx, stack, client, port, validators)
	t.Cleanup(stop)
	registerWebhooks(t, ctx, stack, port, admissionregistrationv1.Fail)
	return hook, port
}

// startWebhookOn runs a webhook with validators on port, its certificate minted by the
// stack's SPIRE through client, until stop is called.
func startWebhookOn(t *testing.T, ctx context.Context, stack *realcluster.Stack, client *spire.Client, port int, validators Validators) (hook *Webhook, stop func()) {
	t.Helper()
	hook, err := New(Options{
		ConfigurationName: "spire-webhook",
		Host:              "127.0.0.1",
		Port:              port,
		ID:                &url.URL{Scheme: "spiffe", Host: stack.SPIRE.TrustDomain(), Path: "/spire-controller-manager-webhook"},
		DNSNames:          []string{"localhost"},
		Minter:            client.Authority(),
		KubeClient:        stack.Client,
		Validators:        validators,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	runCtx, cancel := context.WithCancel(ctx)
	go func() { done <- hook.Run(runCtx) }()
	var once sync.Once
	return hook, func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// registerWebhooks registers the webhook on port of localhost with the stack's kube-apiserver
// for both kinds, as the chart does, with failure policy policy and the API server's default
// timeout (the chart sets none).
func registerWebhooks(t *testing.T, ctx context.Context, stack *realcluster.Stack, port int, policy admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	rule := func(resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"spire.spiffe.io"}, APIVersions: []string{"v1alpha1"},
				Resources: []string{resource}},
		}}
	}
	hookURL := func(path string) *string { return new(fmt.Sprintf("https://localhost:%d%s", port, path)) }
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "spire-webhook"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "vclusterspiffeid.kb.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: hookURL(ClusterSPIFFEIDPath)},
				Rules: rule("clusterspiffeids"), FailurePolicy: &policy, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "vclusterfederatedtrustdomain.kb.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: hookURL(ClusterFederatedTrustDomainPath)},
				Rules: rule("clusterfederatedtrustdomains"), FailurePolicy: &policy, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
		},
	}
	if _, err := stack.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
