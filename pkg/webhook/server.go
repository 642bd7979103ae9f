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
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

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
		body, status, err := readReview(w, r)
		if err != nil {
			http.Error(w, err.Error(), status)
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

// readReview reads a request's body of at most maxReviewBytes. A body declared larger is
// refused before any of it is read (the server then closes the connection rather than read
// it), one that turns out larger as soon as it passes the cap. It returns the status to
// answer with when it fails.
func readReview(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	tooLarge := fmt.Errorf("an admission review is at most %d bytes", maxReviewBytes)
	if r.ContentLength > maxReviewBytes {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, http.StatusRequestTimeout, errors.New("the admission review did not arrive in time")
	case err != nil:
		return nil, http.StatusBadRequest, fmt.Errorf("cannot read the admission review: %w", err)
	}
	return body, 0, nil
}
