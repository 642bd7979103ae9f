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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/serving"
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

// Handler serves both validation paths, under the webhook's limits on review bodies and
// validation (the bounds on connections come from the server that serves it).
func (v Validators) Handler() http.Handler {
	return v.handler(defaultLimits())
}

func (v Validators) handler(limits serverLimits) http.Handler {
	rv := &reviewer{
		budget:  serving.NewBudget(limits.bodyBytes, limits.bodyBytesPerAddress),
		slots:   make(chan struct{}, limits.reviewSlots),
		timeout: limits.validationTimeout,
	}
	mux := http.NewServeMux()
	mux.Handle(ClusterSPIFFEIDPath, rv.handler(func(raw []byte) (field.ErrorList, error) {
		obj := &spirev1alpha1.ClusterSPIFFEID{}
		if err := json.Unmarshal(raw, obj); err != nil {
			return nil, err
		}
		return v.ClusterSPIFFEID(obj), nil
	}))
	mux.Handle(ClusterFederatedTrustDomainPath, rv.handler(func(raw []byte) (field.ErrorList, error) {
		obj := &spirev1alpha1.ClusterFederatedTrustDomain{}
		if err := json.Unmarshal(raw, obj); err != nil {
			return nil, err
		}
		return v.ClusterFederatedTrustDomain(obj), nil
	}))
	return mux
}

// reviewer reads reviews within a byte budget, then decides each in a slot within a deadline.
type reviewer struct {
	budget  *serving.Budget
	slots   chan struct{}
	timeout time.Duration
}

// handler answers AdmissionReview v1 requests with validate's verdict on the object.
// Deletes are always allowed: nothing is left to validate.
func (rv *reviewer) handler(validate func(raw []byte) (field.ErrorList, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "admission reviews are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, release, status, err := rv.readReview(w, r)
		if err != nil {
			if status == http.StatusTooManyRequests {
				tooBusy(w, r, err.Error())
				return
			}
			http.Error(w, err.Error(), status)
			return
		}
		defer release()
		defer serving.Busy(r.Context())()
		review := &admissionv1.AdmissionReview{}
		if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
			http.Error(w, "the body is not an AdmissionReview with a request", http.StatusBadRequest)
			return
		}
		req := review.Request
		resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		if req.Operation != admissionv1.Delete {
			refusal, busy := rv.decide(r.Context(), func() *metav1.Status {
				errs, err := validate(req.Object.Raw)
				switch {
				case err != nil:
					return &metav1.Status{Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
						Message: fmt.Sprintf("cannot decode %s %q: %v", req.Kind.Kind, req.Name, err)}
				case len(errs) > 0:
					return &metav1.Status{Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
						Message: fmt.Sprintf("%s %q is invalid: %s", req.Kind.Kind, req.Name, denial(errs))}
				}
				return nil
			})
			if busy {
				tooBusy(w, r, "too many admission reviews at once")
				return
			}
			resp.Allowed, resp.Result = refusal == nil, refusal
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

// decide runs check in a review slot and returns its refusal (nil admits), within the
// validation timeout: a check that overruns it is a refusal, and keeps its slot until it
// ends, so that overrunning checks cannot pile up. busy means no slot came free in time, or
// the client left.
func (rv *reviewer) decide(ctx context.Context, check func() *metav1.Status) (refusal *metav1.Status, busy bool) {
	timer := time.NewTimer(rv.timeout)
	defer timer.Stop()
	select {
	case rv.slots <- struct{}{}:
	case <-timer.C:
		return nil, true
	case <-ctx.Done():
		return nil, true
	}
	decided := make(chan *metav1.Status, 1)
	go func() {
		defer func() { <-rv.slots }()
		defer func() {
			if p := recover(); p != nil {
				klog.FromContext(ctx).Error(nil, "Validation panicked", "panic", p)
				decided <- &metav1.Status{Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
					Message: fmt.Sprintf("validation failed: %v", p)}
			}
		}()
		decided <- check()
	}()
	select {
	case refusal := <-decided:
		return refusal, false
	case <-timer.C:
		return &metav1.Status{Code: http.StatusGatewayTimeout, Reason: metav1.StatusReasonTimeout,
			Message: fmt.Sprintf("validation did not finish within %v; the object is refused", rv.timeout)}, false
	case <-ctx.Done():
		return nil, true
	}
}

// denial lists the first maxListedErrors errors, then the count of the others; in each, the
// value is cut to maxValueBytes and the detail to maxDetailBytes, so that what is wrong stays
// readable after a long template. Its length is bounded whatever the object, and it is built
// in one pass.
func denial(errs field.ErrorList) string {
	var b strings.Builder
	for i, e := range errs[:min(len(errs), maxListedErrors)] {
		if i > 0 {
			b.WriteString("; ")
		}
		bounded := *e
		if value, ok := bounded.BadValue.(string); ok {
			bounded.BadValue = truncate(value, maxValueBytes)
		}
		bounded.Detail = truncate(bounded.Detail, maxDetailBytes)
		b.WriteString(truncate(bounded.Error(), maxErrorBytes))
	}
	if more := len(errs) - maxListedErrors; more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	return b.String()
}

// truncate cuts s to at most n bytes, at a character boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// tooBusy answers 429 with Retry-After, which the API server waits for and calls again; an
// HTTP/1 connection is closed after it (on HTTP/2 that would end every stream of it).
func tooBusy(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Retry-After", retryAfterSeconds)
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}

// readReview reads a request's body of at most maxReviewBytes within the byte budget. A body
// declared larger is refused before any of it is read (the server then closes the connection
// rather than read it), one that turns out larger as soon as it passes the cap. It returns
// the status to answer with when it fails; on success, release frees the body's bytes.
func (rv *reviewer) readReview(w http.ResponseWriter, r *http.Request) (body []byte, release func(), status int, err error) {
	tooLarge := fmt.Errorf("an admission review is at most %d bytes", maxReviewBytes)
	if r.ContentLength > maxReviewBytes {
		return nil, nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	body, release, err = rv.budget.ReadBody(w, r, maxReviewBytes)
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return nil, nil, http.StatusRequestEntityTooLarge, tooLarge
	case errors.Is(err, serving.ErrBudgetExhausted):
		return nil, nil, http.StatusTooManyRequests, err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, nil, http.StatusRequestTimeout, errors.New("the admission review did not arrive in time")
	case err != nil:
		return nil, nil, http.StatusBadRequest, fmt.Errorf("cannot read the admission review: %w", err)
	}
	return body, release, 0, nil
}
