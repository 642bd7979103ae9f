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
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodFacts is what CheckRequest reads of the pod a request names, as the caller's pod cache
// holds it (which may be a compact form of the pod rather than a *corev1.Pod).
type PodFacts struct {
	Namespace, Name    string
	UID                types.UID
	NodeName           string
	ServiceAccountName string
	Phase              corev1.PodPhase
	// Deleting is set once the pod has a deletionTimestamp.
	Deleting bool
}

// NodeFacts is what CheckRequest reads of the node a request names.
type NodeFacts struct {
	Name string
	UID  types.UID
}

// CheckRequest returns nil when the request's spec matches the pod and node the caller
// found under the names it gives (nil when not found), and the pod has neither finished nor
// begun to be deleted; else the decision to deny it, whose message names every field that
// differs. kube-apiserver's noderestriction admission already ties a kubelet's requests to
// its own pods; these checks keep the signer from issuing for a pod that has since been
// replaced, moved, finished or deleted, and check requests NodeRestriction does not (those
// of a creator trusted with podCertificates.trustNonNodeRequesters).
func CheckRequest(req *certificatesv1.PodCertificateRequest, pod *PodFacts, node *NodeFacts) *Decision {
	spec := &req.Spec
	podName := quote(req.Namespace) + "/" + quote(spec.PodName)
	if pod == nil {
		return recheck(Decide(ReasonPodNotFound, "pod %s not found", podName))
	}
	var diffs []string
	differ := func(field, requested, actual, what string) {
		if requested != actual {
			diffs = append(diffs, fmt.Sprintf("%s is %s, the %s is %s", field, quote(requested), what, quote(actual)))
		}
	}
	differ("metadata.namespace", req.Namespace, pod.Namespace, "pod's namespace")
	differ("spec.podName", spec.PodName, pod.Name, "pod's name")
	differ("spec.podUID", string(spec.PodUID), string(pod.UID), "pod's UID")
	differ("spec.nodeName", string(spec.NodeName), pod.NodeName, "pod's node")
	differ("spec.serviceAccountName", spec.ServiceAccountName, pod.ServiceAccountName, "pod's service account")
	if len(diffs) > 0 {
		return recheck(Decide(ReasonPodMismatch, "the request does not match pod %s: %s", podName, strings.Join(diffs, "; ")))
	}
	// A finished pod never runs again, so a cache that says so is never ahead of the truth.
	if pod.Phase == corev1.PodSucceeded || pod.Phase == corev1.PodFailed {
		return Decide(ReasonPodFinished, "pod %s has finished (phase %s)", podName, pod.Phase)
	}
	// Nor does a pod that is being deleted stop being so.
	if pod.Deleting {
		return DenyDeleting(req)
	}
	if node == nil {
		return recheck(Decide(ReasonNodeNotFound, "node %s not found", quote(string(spec.NodeName))))
	}
	differ("spec.nodeName", string(spec.NodeName), node.Name, "node's name")
	differ("spec.nodeUID", string(spec.NodeUID), string(node.UID), "node's UID")
	if len(diffs) > 0 {
		return recheck(Decide(ReasonPodMismatch, "the request does not match node %s: %s", quote(string(spec.NodeName)), strings.Join(diffs, "; ")))
	}
	return nil
}

// DenyDeleting is the decision to deny a request whose pod is being deleted.
func DenyDeleting(req *certificatesv1.PodCertificateRequest) *Decision {
	return Decide(ReasonPodDeleting, "pod %s/%s is being deleted", quote(req.Namespace), quote(req.Spec.PodName))
}

// CheckServiceAccount returns nil when the request's spec.serviceAccountUID is the UID of
// the service account it names, as the caller found it (found false: it does not exist);
// else the decision to deny it, to be rechecked against the API server: a cached service
// account may lag one that was replaced.
func CheckServiceAccount(req *certificatesv1.PodCertificateRequest, uid types.UID, found bool) *Decision {
	name := quote(req.Namespace) + "/" + quote(req.Spec.ServiceAccountName)
	switch {
	case !found:
		return recheck(Decide(ReasonPodMismatch, "service account %s not found", name))
	case uid != req.Spec.ServiceAccountUID:
		return recheck(Decide(ReasonPodMismatch, "the request does not match service account %s: spec.serviceAccountUID is %s, the service account's UID is %s",
			name, quote(string(req.Spec.ServiceAccountUID)), quote(string(uid))))
	}
	return nil
}

// recheck marks d as resting on facts a lagging informer may have wrong.
func recheck(d *Decision) *Decision {
	d.Recheck = true
	return d
}
