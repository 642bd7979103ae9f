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
	"maps"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// PodCertificateSources returns the podCertificate sources of a pod's projected volumes, of
// every signer. A pod's volumes cannot change, so the sources of a pod UID never do.
func PodCertificateSources(pod *corev1.Pod) []corev1.PodCertificateProjection {
	var sources []corev1.PodCertificateProjection
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.PodCertificate != nil {
				sources = append(sources, *s.PodCertificate)
			}
		}
	}
	return sources
}

// CheckVolume returns nil when one of the pod's podCertificate sources is the one the
// kubelet made the request for: of the request's signer, with its maxExpirationSeconds
// (both default to DefaultMaxExpirationSeconds) and its user annotations; else the decision
// to deny it. A kubelet requests certificates only for the volumes its pod mounts, so a
// request that matches none was not made by the pod's kubelet for the pod.
func CheckVolume(req *certificatesv1.PodCertificateRequest, sources []corev1.PodCertificateProjection) *Decision {
	podName := quote(req.Namespace) + "/" + quote(req.Spec.PodName)
	var ofSigner []string
	for _, s := range sources {
		if s.SignerName != req.Spec.SignerName {
			continue
		}
		if maxExpiration(s.MaxExpirationSeconds) == maxExpiration(req.Spec.MaxExpirationSeconds) &&
			maps.Equal(s.UserAnnotations, req.Spec.UnverifiedUserAnnotations) {
			return nil
		}
		if len(ofSigner) < maxFailuresNamed {
			ofSigner = append(ofSigner, describeSource(maxExpiration(s.MaxExpirationSeconds), s.UserAnnotations))
		}
	}
	if len(ofSigner) == 0 {
		return Decide(ReasonNoPodCertificateVolume, "pod %s mounts no podCertificate volume for signer %s", podName, quote(req.Spec.SignerName))
	}
	return Decide(ReasonNoPodCertificateVolume, "pod %s mounts no podCertificate volume for signer %s with %s; its volumes for the signer have %s",
		podName, quote(req.Spec.SignerName), describeSource(maxExpiration(req.Spec.MaxExpirationSeconds), req.Spec.UnverifiedUserAnnotations),
		strings.Join(ofSigner, "; "))
}

// maxFailuresNamed bounds how many volumes a denial describes.
const maxFailuresNamed = 3

// maxExpiration is a maxExpirationSeconds as kube-apiserver defaults it.
func maxExpiration(seconds *int32) int32 {
	if seconds == nil {
		return DefaultMaxExpirationSeconds
	}
	return *seconds
}

// describeSource describes a podCertificate source's lifetime and user annotations.
func describeSource(maxExpirationSeconds int32, annotations map[string]string) string {
	keys := slices.Sorted(maps.Keys(annotations))
	quoted := make([]string, 0, len(keys))
	for _, k := range keys {
		quoted = append(quoted, quote(k)+"="+quote(annotations[k]))
	}
	return fmt.Sprintf("maxExpirationSeconds %d and user annotations {%s}", maxExpirationSeconds, strings.Join(quoted, ", "))
}
