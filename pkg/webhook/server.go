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
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// The paths spire-controller-manager serves, which the Helm chart's
// ValidatingWebhookConfiguration calls.
const (
	ClusterSPIFFEIDPath             = "/validate-spire-spiffe-io-v1alpha1-clusterspiffeid"
	ClusterFederatedTrustDomainPath = "/validate-spire-spiffe-io-v1alpha1-clusterfederatedtrustdomain"
)

// maxReviewBytes bounds an AdmissionReview body: the API server limits objects to about 1.5 MiB
// and sends at most the object and its old version.
const maxReviewBytes = 4 << 20

// Validators check a resource's spec with the controller's own code, so that what the webhook
// admits is what the controller can reconcile. Each returns the problems by field path.
type Validators struct {
	ClusterSPIFFEID             func(*spirev1alpha1.ClusterSPIFFEID) field.ErrorList
	ClusterFederatedTrustDomain func(*spirev1alpha1.ClusterFederatedTrustDomain) field.ErrorList
}

// Handler serves both validation paths.
func (v Validators) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(ClusterSPIFFEIDPath, reviewHandler(func(raw []byte) (field.ErrorList, error) {
		obj := &spirev1alpha1.ClusterSPIFFEID{}
		if err := json.Unmarshal(raw, obj); err != nil {
			return nil, err
		}
		return v.ClusterSPIFFEID(obj), nil
	}))
	mux.Handle(ClusterFederatedTrustDomainPath, reviewHandler(func(raw []byte) (field.ErrorList, error) {
		obj := &spirev1alpha1.ClusterFederatedTrustDomain{}
		if err := json.Unmarshal(raw, obj); err != nil {
			return nil, err
		}
		return v.ClusterFederatedTrustDomain(obj), nil
	}))
	return mux
}

// reviewHandler answers AdmissionReview v1 requests with validate's verdict on the object.
// Deletes are always allowed: nothing is left to validate.
func reviewHandler(validate func(raw []byte) (field.ErrorList, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "admission reviews are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
		if err != nil || len(body) > maxReviewBytes {
			http.Error(w, "cannot read the admission review", http.StatusBadRequest)
			return
		}
		review := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
			http.Error(w, "the body is not an AdmissionReview with a request", http.StatusBadRequest)
			return
		}
		req := review.Request
		resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		if req.Operation != admissionv1.Delete {
			errs, err := validate(req.Object.Raw)
			switch {
			case err != nil:
				resp.Allowed = false
				resp.Result = &metav1.Status{Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
					Message: fmt.Sprintf("cannot decode %s %q: %v", req.Kind.Kind, req.Name, err)}
			case len(errs) > 0:
				resp.Allowed = false
				resp.Result = &metav1.Status{Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
					Message: fmt.Sprintf("%s %q is invalid: %s", req.Kind.Kind, req.Name, errs.ToAggregate().Error())}
			}
		}
		klog.FromContext(r.Context()).V(2).Info("Admission review", "kind", req.Kind.Kind, "name", req.Name,
			"operation", req.Operation, "allowed", resp.Allowed)
		out, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}
