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

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

func TestRotationReason(t *testing.T) {
	minted := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	expires := minted.Add(24 * time.Hour)
	names := []string{"a.ns.svc"}
	cases := []struct {
		name      string
		have      bool
		haveNames []string
		now       time.Time
		want      string
	}{
		{"none yet", false, nil, minted, "no certificate yet"},
		{"fresh", true, names, minted.Add(time.Hour), ""},
		{"just before half its life", true, names, minted.Add(12*time.Hour - time.Second), ""},
		{"at half its life", true, names, minted.Add(12 * time.Hour), "expires soon"},
		{"expired", true, names, expires, "expired"},
		{"names changed", true, []string{"b.ns.svc"}, minted.Add(time.Hour), "webhook service names changed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := rotationReason(tc.have, tc.haveNames, names, minted, expires, tc.now); got != tc.want {
				t.Errorf("rotationReason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCertificateDNSNames(t *testing.T) {
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{
		{Name: "b", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "spire", Name: "web"}}},
		{Name: "a", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "spire", Name: "web"}}},
		{Name: "c", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "other", Name: "hook"}}},
		{Name: "ip", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: new("https://127.0.0.1:9443/x")}},
		{Name: "url", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: new("https://webhook.example:9443/x")}},
	}}
	want := []string{"extra.example", "hook.other.svc", "web.spire.svc", "webhook.example"}
	if diff := cmp.Diff(want, certificateDNSNames(config, []string{"extra.example", "web.spire.svc"})); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

func TestCABundlePatchTouchesOnlyStaleWebhooks(t *testing.T) {
	bundle := []byte("PEM")
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{
		{Name: "current", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: bundle}},
		{Name: "stale", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("old")}},
	}}
	patch, err := caBundlePatch(config, bundle)
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]any
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"op": "test", "path": "/webhooks/1/name", "value": "stale"},
		{"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "UEVN"}, // base64 of PEM
	}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
	config.Webhooks[1].ClientConfig.CABundle = bundle
	if patch, err := caBundlePatch(config, bundle); err != nil || patch != nil {
		t.Errorf("all current: patch %s, err %v; want none", patch, err)
	}
}

func TestReviewHandler(t *testing.T) {
	validators := Validators{
		ClusterSPIFFEID: func(o *spirev1alpha1.ClusterSPIFFEID) field.ErrorList {
			if o.Spec.SPIFFEIDTemplate == "bad" {
				return field.ErrorList{field.Invalid(field.NewPath("spec", "spiffeIDTemplate"), "bad", "does not parse")}
			}
			return nil
		},
		ClusterFederatedTrustDomain: func(*spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList {
			return field.ErrorList{field.Required(field.NewPath("spec", "bundleEndpointURL"), "")}
		},
	}
	server := httptest.NewServer(validators.Handler())
	defer server.Close()

	cases := []struct {
		name        string
		path        string
		op          admissionv1.Operation
		object      runtime.Object
		raw         []byte
		wantAllowed bool
		wantMessage string
	}{
		{name: "good ClusterSPIFFEID", path: ClusterSPIFFEIDPath, op: admissionv1.Create,
			object: &spirev1alpha1.ClusterSPIFFEID{Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "good"}}, wantAllowed: true},
		{name: "bad ClusterSPIFFEID names the field", path: ClusterSPIFFEIDPath, op: admissionv1.Update,
			object:      &spirev1alpha1.ClusterSPIFFEID{Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "bad"}},
			wantMessage: `ClusterSPIFFEID "x" is invalid: spec.spiffeIDTemplate: Invalid value: "bad": does not parse`},
		{name: "delete is always allowed", path: ClusterSPIFFEIDPath, op: admissionv1.Delete,
			object: &spirev1alpha1.ClusterSPIFFEID{Spec: spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "bad"}}, wantAllowed: true},
		{name: "federation path uses its validator", path: ClusterFederatedTrustDomainPath, op: admissionv1.Create,
			object:      &spirev1alpha1.ClusterFederatedTrustDomain{},
			wantMessage: "spec.bundleEndpointURL: Required value"},
		{name: "undecodable object", path: ClusterSPIFFEIDPath, op: admissionv1.Create,
			raw: []byte(`{"spec": 5}`), wantMessage: "cannot decode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw
			if raw == nil {
				var err error
				if raw, err = json.Marshal(tc.object); err != nil {
					t.Fatal(err)
				}
			}
			review := admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: "uid-1", Name: "x", Operation: tc.op,
					Kind: metav1.GroupVersionKind{Kind: "ClusterSPIFFEID"}, Object: runtime.RawExtension{Raw: raw}},
			}
			if tc.path == ClusterFederatedTrustDomainPath {
				review.Request.Kind.Kind = "ClusterFederatedTrustDomain"
			}
			body, _ := json.Marshal(review)
			resp, err := http.Post(server.URL+tc.path, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got admissionv1.AdmissionReview
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got.Response == nil || got.Response.UID != "uid-1" {
				t.Fatalf("response %+v does not answer request uid-1", got.Response)
			}
			if got.Response.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%+v)", got.Response.Allowed, tc.wantAllowed, got.Response.Result)
			}
			if tc.wantMessage != "" && (got.Response.Result == nil || !strings.Contains(got.Response.Result.Message, tc.wantMessage)) {
				t.Errorf("message %+v, want it to contain %q", got.Response.Result, tc.wantMessage)
			}
		})
	}

	resp, err := http.Post(server.URL+ClusterSPIFFEIDPath, "application/json", strings.NewReader("not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("garbage body: status %d, want 400", resp.StatusCode)
	}
}
