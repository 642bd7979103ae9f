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
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// TestManyInvalidTemplatesAreRefusedPromptly: ClusterSPIFFEIDs full of invalid one-action DNS
// name templates, validated by the controller's own code, are refused within the validation
// timeout with a short message. At the per-object cap of templates, each one invalid, the
// message lists the first errors and counts the rest; past the cap (14,000 templates, 110 KiB)
// it is one error that says so. Joining every error, as an aggregate does, took 25 s and 3.3 MB
// for 14,000.
func TestManyInvalidTemplatesAreRefusedPromptly(t *testing.T) {
	limits := defaultLimits()
	server := httptest.NewServer(Validators{
		ClusterSPIFFEID: func(o *spirev1alpha1.ClusterSPIFFEID) field.ErrorList {
			return render.ValidateClusterSPIFFEID(o, "example.org")
		},
		ClusterFederatedTrustDomain: func(*spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList { return nil },
	}.handler(limits))
	defer server.Close()

	for _, tc := range []struct {
		templates int
		want      []string // in the message
	}{
		// 127 DNS name templates and the SPIFFE ID template: the cap of 128.
		{templates: 127, want: []string{"spec.dnsNameTemplates[0]", "more"}},
		{templates: 14000, want: []string{"spec", "more than the 128"}},
	} {
		obj := &spirev1alpha1.ClusterSPIFFEID{
			TypeMeta:   metav1.TypeMeta{APIVersion: "spire.spiffe.io/v1alpha1", Kind: "ClusterSPIFFEID"},
			ObjectMeta: metav1.ObjectMeta{Name: "many"},
			Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://example.org/x"},
		}
		for range tc.templates {
			obj.Spec.DNSNameTemplates = append(obj.Spec.DNSNameTemplates, "{{.X}}")
		}
		message, elapsed := review(t, server.URL, obj, limits.validationTimeout+5*time.Second)
		t.Logf("%d invalid templates: refused after %v with %d bytes", tc.templates, elapsed.Round(time.Millisecond), len(message))
		if elapsed > limits.validationTimeout+time.Second {
			t.Errorf("%d templates: refused after %v, past the validation timeout %v", tc.templates, elapsed, limits.validationTimeout)
		}
		for _, want := range tc.want {
			if !strings.Contains(message, want) {
				t.Errorf("%d templates: the message does not say %q: %.300s", tc.templates, want, message)
			}
		}
		if bound := maxListedErrors*(maxErrorBytes+8) + 1024; len(message) > bound {
			t.Errorf("%d templates: the message is %d bytes, over %d", tc.templates, len(message), bound)
		}
	}
}

// TestValidationOverrunIsRefused: a validation that does not finish within the timeout is a
// refusal, answered at the timeout, not a call the API server gives up on (with failurePolicy
// Ignore that admits the object); it keeps its slot until it ends, so that a review that
// needs one meanwhile is answered 429.
func TestValidationOverrunIsRefused(t *testing.T) {
	limits := defaultLimits()
	limits.validationTimeout, limits.reviewSlots = 500*time.Millisecond, 1
	release := make(chan struct{})
	server := httptest.NewServer(Validators{
		ClusterSPIFFEID: func(o *spirev1alpha1.ClusterSPIFFEID) field.ErrorList {
			if o.Name == "stuck" {
				<-release
			}
			return nil
		},
		ClusterFederatedTrustDomain: func(*spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList { return nil },
	}.handler(limits))
	defer server.Close()
	defer close(release)

	obj := func(name string) *spirev1alpha1.ClusterSPIFFEID {
		return &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://example.org/x"}}
	}
	message, elapsed := review(t, server.URL, obj("stuck"), 10*time.Second)
	if !strings.Contains(message, "did not finish") {
		t.Fatalf("an overrunning validation was answered %q, want a refusal", message)
	}
	if elapsed > limits.validationTimeout+time.Second {
		t.Errorf("refused after %v, want about the timeout %v", elapsed, limits.validationTimeout)
	}
	body := reviewBody(t, obj("next"))
	resp, err := http.Post(server.URL+ClusterSPIFFEIDPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("with the only slot held by an overrunning validation, a review was answered %d, want 429 with Retry-After", resp.StatusCode)
	}
}

// review posts a review creating obj and returns the refusal's message ("" if allowed) and
// how long the answer took.
func review(t *testing.T, url string, obj *spirev1alpha1.ClusterSPIFFEID, timeout time.Duration) (string, time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: timeout}
	start := time.Now()
	resp, err := client.Post(url+ClusterSPIFFEIDPath, "application/json", bytes.NewReader(reviewBody(t, obj)))
	if err != nil {
		t.Fatalf("no answer after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	defer resp.Body.Close()
	got := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(got); err != nil || got.Response == nil {
		t.Fatalf("status %d: not an AdmissionReview answer: %v", resp.StatusCode, err)
	}
	elapsed := time.Since(start)
	if got.Response.Allowed {
		return "", elapsed
	}
	return got.Response.Result.Message, elapsed
}

func reviewBody(t *testing.T, obj *spirev1alpha1.ClusterSPIFFEID) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "uid-1", Name: obj.Name, Operation: admissionv1.Create,
			Kind:   metav1.GroupVersionKind{Group: "spire.spiffe.io", Version: "v1alpha1", Kind: "ClusterSPIFFEID"},
			Object: k8sruntime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestDenialKeepsTheDetailOfALongValue: a denial cuts a long value, not the reason after it,
// and counts the errors it does not list.
func TestDenialKeepsTheDetailOfALongValue(t *testing.T) {
	p := field.NewPath("spec", "spiffeIDTemplate")
	errs := field.ErrorList{field.Invalid(p, strings.Repeat("x", 16<<10), "functions would allocate more than 1 MiB")}
	for i := range 100 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "dnsNameTemplates").Index(i), "{{.X}}", "can't evaluate field X"))
	}
	msg := denial(errs)
	if !strings.Contains(msg, "functions would allocate more than 1 MiB") {
		t.Errorf("the reason after a 16 KiB value is lost: %.400s", msg)
	}
	if want := "and 85 more"; !strings.HasSuffix(msg, want) {
		t.Errorf("the message does not end with %q: …%s", want, msg[max(0, len(msg)-100):])
	}
	if bound := maxListedErrors*(maxErrorBytes+2) + 32; len(msg) > bound {
		t.Errorf("the message is %d bytes, over %d", len(msg), bound)
	}
}
