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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestCheckVolume(t *testing.T) {
	const signer = "example.com/x509-svid"
	source := func(mutate ...func(*corev1.PodCertificateProjection)) corev1.PodCertificateProjection {
		s := corev1.PodCertificateProjection{SignerName: signer, KeyType: "ECDSAP256"}
		for _, m := range mutate {
			m(&s)
		}
		return s
	}
	for _, tc := range []struct {
		name        string
		max         *int32
		annotations map[string]string
		sources     []corev1.PodCertificateProjection
		wantInMsg   []string // nil: no decision
	}{
		{name: "defaults on both sides", sources: []corev1.PodCertificateProjection{source()}},
		{name: "the default written out", max: ptr.To[int32](86400), sources: []corev1.PodCertificateProjection{source()}},
		{name: "one of several", max: ptr.To[int32](7200), annotations: map[string]string{"a": "b"}, sources: []corev1.PodCertificateProjection{
			source(), source(func(s *corev1.PodCertificateProjection) {
				s.MaxExpirationSeconds = ptr.To[int32](7200)
				s.UserAnnotations = map[string]string{"a": "b"}
			}),
		}},
		{name: "no volume", wantInMsg: []string{`pod "ns"/"web-0" mounts no podCertificate volume for signer "example.com/x509-svid"`}},
		{name: "another signer's volume", sources: []corev1.PodCertificateProjection{source(func(s *corev1.PodCertificateProjection) { s.SignerName = "example.com/other" })},
			wantInMsg: []string{`mounts no podCertificate volume for signer "example.com/x509-svid"`}},
		{name: "another lifetime", max: ptr.To[int32](91 * 86400), sources: []corev1.PodCertificateProjection{source()},
			wantInMsg: []string{"with maxExpirationSeconds 7862400 and user annotations {}", "its volumes for the signer have maxExpirationSeconds 86400"}},
		{name: "annotations the volume does not have", annotations: map[string]string{"spire.spiffe.io/clusterspiffeid": "admin"}, sources: []corev1.PodCertificateProjection{source()},
			wantInMsg: []string{`user annotations {"spire.spiffe.io/clusterspiffeid"="admin"}`, "have maxExpirationSeconds 86400 and user annotations {}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := testRequest()
			req.Spec.SignerName = signer
			req.Spec.MaxExpirationSeconds = tc.max
			req.Spec.UnverifiedUserAnnotations = tc.annotations
			d := CheckVolume(req, tc.sources)
			if tc.wantInMsg == nil {
				if d != nil {
					t.Fatalf("CheckVolume = %+v, want nil", d)
				}
				return
			}
			if d == nil || d.Reason != ReasonNoPodCertificateVolume || d.Recheck {
				t.Fatalf("CheckVolume = %+v, want a final %s", d, ReasonNoPodCertificateVolume)
			}
			for _, s := range tc.wantInMsg {
				if !strings.Contains(d.Message, s) {
					t.Errorf("message %q does not say %q", d.Message, s)
				}
			}
		})
	}
}

func TestPodCertificateSources(t *testing.T) {
	a := corev1.PodCertificateProjection{SignerName: "example.com/a"}
	b := corev1.PodCertificateProjection{SignerName: "example.com/b"}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "one", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}, {PodCertificate: &a},
		}}}},
		{Name: "two", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{PodCertificate: &b}}}}},
	}}}
	got := PodCertificateSources(pod)
	if len(got) != 2 || got[0].SignerName != a.SignerName || got[1].SignerName != b.SignerName {
		t.Errorf("PodCertificateSources = %+v, want %s and %s", got, a.SignerName, b.SignerName)
	}
}
