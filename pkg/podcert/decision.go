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

package podcert

import (
	"fmt"
	"time"
	"unicode/utf8"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reason is the reason of the terminal condition the signer sets on a request it does not
// issue. Each reason belongs to one condition type (ConditionType).
type Reason string

// The reasons, with the condition type each is set on. Denied: the request will never be
// issued as it stands. Failed: the signer could not issue it.
const (
	// ReasonUnsupportedKeyType (Denied): the stub CSR's key is not of a type this signer
	// issues for; the message names the supported ones. Kubernetes' own reason.
	ReasonUnsupportedKeyType Reason = Reason(certificatesv1.PodCertificateRequestConditionUnsupportedKeyType)
	// ReasonInvalidUnverifiedUserAnnotations (Denied): spec.unverifiedUserAnnotations has a
	// key this signer does not know or a value it cannot use. Kubernetes' own reason.
	ReasonInvalidUnverifiedUserAnnotations Reason = Reason(certificatesv1.PodCertificateRequestConditionInvalidUserConfig)
	// ReasonMalformedCSR (Denied): spec.stubPKCS10Request is too large or does not parse.
	ReasonMalformedCSR Reason = "MalformedStubPKCS10Request"
	// ReasonPodNotFound (Denied): the pod the request names does not exist.
	ReasonPodNotFound Reason = "PodNotFound"
	// ReasonNodeNotFound (Denied): the node the request names does not exist.
	ReasonNodeNotFound Reason = "NodeNotFound"
	// ReasonPodMismatch (Denied): the request's pod UID, node name, node UID, service
	// account or service account UID differs from the pod's, node's or service account's.
	ReasonPodMismatch Reason = "PodMismatch"
	// ReasonNoPodCertificateVolume (Denied): the pod mounts no podCertificate volume for the
	// signer with the request's maxExpirationSeconds and user annotations: its kubelet would
	// not have made the request.
	ReasonNoPodCertificateVolume Reason = "NoPodCertificateVolume"
	// ReasonPodDeleting (Denied): the pod is being deleted.
	ReasonPodDeleting Reason = "PodDeleting"
	// ReasonPodFinished (Denied): the pod has succeeded or failed; it runs nothing that
	// needs a certificate.
	ReasonPodFinished Reason = "PodFinished"
	// ReasonNoIdentity (Denied): no ClusterSPIFFEID gives the pod an identity.
	ReasonNoIdentity Reason = "NoIdentity"
	// ReasonClusterSPIFFEIDNotApplicable (Denied): the ClusterSPIFFEID that
	// AnnotationClusterSPIFFEID names does not exist or gives the pod no identity.
	ReasonClusterSPIFFEIDNotApplicable Reason = "ClusterSPIFFEIDNotApplicable"
	// ReasonReservedSPIFFEID (Denied): the pod's SPIFFE ID is one SPIRE gives no workload (an
	// empty path, or one under /spire), or the signer's own.
	ReasonReservedSPIFFEID Reason = "ReservedSPIFFEID"
	// ReasonPrivilegedIdentity (Denied): the ClusterSPIFFEID that gives the pod its identity
	// marks it admin or downstream, and the config does not allow such pod certificates.
	ReasonPrivilegedIdentity Reason = "PrivilegedIdentity"

	// ReasonSPIREUnavailable (Failed): the signer has no CA because SPIRE did not answer.
	ReasonSPIREUnavailable Reason = "SPIREUnavailable"
	// ReasonCAExpired (Failed): the signer's CA cannot cover the shortest certificate
	// kube-apiserver accepts, and no renewed one came in time.
	ReasonCAExpired Reason = "CAExpired"
	// ReasonSigningFailed (Failed): signing the certificate failed.
	ReasonSigningFailed Reason = "SigningFailed"
)

// conditionTypes is the condition type of every reason.
var conditionTypes = map[Reason]string{
	ReasonUnsupportedKeyType:               certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonInvalidUnverifiedUserAnnotations: certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonMalformedCSR:                     certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonPodNotFound:                      certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonNodeNotFound:                     certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonPodMismatch:                      certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonPodFinished:                      certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonNoIdentity:                       certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonClusterSPIFFEIDNotApplicable:     certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonNoPodCertificateVolume:           certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonPodDeleting:                      certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonReservedSPIFFEID:                 certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonPrivilegedIdentity:               certificatesv1.PodCertificateRequestConditionTypeDenied,
	ReasonSPIREUnavailable:                 certificatesv1.PodCertificateRequestConditionTypeFailed,
	ReasonCAExpired:                        certificatesv1.PodCertificateRequestConditionTypeFailed,
	ReasonSigningFailed:                    certificatesv1.PodCertificateRequestConditionTypeFailed,
}

// ConditionType is the type of the condition r is set on: Denied or Failed. A reason not
// declared here is Failed: the signer's trouble, never a verdict on the request.
func (r Reason) ConditionType() string {
	if t, ok := conditionTypes[r]; ok {
		return t
	}
	return certificatesv1.PodCertificateRequestConditionTypeFailed
}

// MaxMessageBytes bounds a Decision's message. Conditions allow 32768 bytes; a message
// about one request needs far fewer, and this keeps a long error from filling the object.
const MaxMessageBytes = 1024

// Decision is the terminal outcome for a request the signer does not issue.
type Decision struct {
	Reason  Reason
	Message string
	// Recheck is set when the decision rests on a pod or node that an informer may not have
	// caught up with (missing, or different from what the request names): the caller
	// re-reads them from the API server and checks again before writing the decision, since
	// a Denied condition is final.
	Recheck bool
}

// Decide returns a decision with reason r and a message from format and args, cut to
// MaxMessageBytes.
func Decide(r Reason, format string, args ...any) *Decision {
	return &Decision{Reason: r, Message: truncate(fmt.Sprintf(format, args...), MaxMessageBytes)}
}

// Type is the type of the condition d sets: Denied or Failed.
func (d *Decision) Type() string { return d.Reason.ConditionType() }

// Condition is the condition that records d on a request of generation observedGeneration,
// set at now. kube-apiserver requires its status to be True.
func (d *Decision) Condition(observedGeneration int64, now time.Time) metav1.Condition {
	return metav1.Condition{
		Type:               d.Type(),
		Status:             metav1.ConditionTrue,
		ObservedGeneration: observedGeneration,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             string(d.Reason),
		Message:            d.Message,
	}
}

// maxValueBytes bounds a value from a request quoted in a message.
const maxValueBytes = 64

// quote returns s quoted for a message, cut to maxValueBytes: messages never echo unbounded
// input.
func quote(s string) string {
	if len(s) <= maxValueBytes {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", truncate(s, maxValueBytes))
}

// truncate returns s cut to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
