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
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestReasons(t *testing.T) {
	denied := certificatesv1.PodCertificateRequestConditionTypeDenied
	failed := certificatesv1.PodCertificateRequestConditionTypeFailed
	want := map[Reason]string{
		"UnsupportedKeyType":               denied,
		"InvalidUnverifiedUserAnnotations": denied,
		"MalformedStubPKCS10Request":       denied,
		"PodNotFound":                      denied,
		"NodeNotFound":                     denied,
		"PodMismatch":                      denied,
		"PodFinished":                      denied,
		"NoIdentity":                       denied,
		"ClusterSPIFFEIDNotApplicable":     denied,
		"NoPodCertificateVolume":           denied,
		"PodDeleting":                      denied,
		"ReservedSPIFFEID":                 denied,
		"PrivilegedIdentity":               denied,
		"SPIREUnavailable":                 failed,
		"CAExpired":                        failed,
		"SigningFailed":                    failed,
	}
	if diff := cmp.Diff(want, conditionTypes); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if got := Reason("SomethingNew").ConditionType(); got != failed {
		t.Errorf("an undeclared reason's condition type is %s, want Failed", got)
	}
	// kube-apiserver validates conditions with ValidateConditions: every reason must pass.
	now := time.Now()
	for r := range conditionTypes {
		c := Decide(r, "message").Condition(3, now)
		if errs := metav1validation.ValidateConditions([]metav1.Condition{c}, field.NewPath("status", "conditions")); len(errs) > 0 {
			t.Errorf("reason %s: %v", r, errs.ToAggregate())
		}
	}
}

func TestDecisionCondition(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	got := Decide(ReasonPodFinished, "pod %s has finished", "a").Condition(7, now)
	want := metav1.Condition{
		Type:               certificatesv1.PodCertificateRequestConditionTypeDenied,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: 7,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             "PodFinished",
		Message:            "pod a has finished",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("condition (-want +got):\n%s", diff)
	}
}

func TestDecideBoundsTheMessage(t *testing.T) {
	d := Decide(ReasonSigningFailed, "%s", strings.Repeat("é", MaxMessageBytes))
	if len(d.Message) > MaxMessageBytes || !utf8.ValidString(d.Message) {
		t.Errorf("message of %d bytes (valid UTF-8: %v), want at most %d", len(d.Message), utf8.ValidString(d.Message), MaxMessageBytes)
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", `"abc"`},
		{strings.Repeat("a", maxValueBytes), `"` + strings.Repeat("a", maxValueBytes) + `"`},
		{strings.Repeat("a", maxValueBytes+1), `"` + strings.Repeat("a", maxValueBytes) + `"…`},
		{"a\nb", `"a\nb"`},
		// A cut never splits a rune.
		{"a" + strings.Repeat("é", maxValueBytes), `"a` + strings.Repeat("é", (maxValueBytes-1)/2) + `"…`},
	} {
		if got := quote(tc.in); got != tc.want {
			t.Errorf("quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
