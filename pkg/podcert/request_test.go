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

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testRequest() *certificatesv1.PodCertificateRequest {
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "req"},
		Spec: certificatesv1.PodCertificateRequestSpec{
			PodName:            "web-0",
			PodUID:             "pod-uid",
			ServiceAccountName: "web",
			ServiceAccountUID:  "sa-uid",
			NodeName:           "node-a",
			NodeUID:            "node-uid",
		},
	}
}

func testPod() *PodFacts {
	return &PodFacts{Namespace: "ns", Name: "web-0", UID: "pod-uid", NodeName: "node-a", ServiceAccountName: "web", Phase: corev1.PodRunning}
}

func testNode() *NodeFacts {
	return &NodeFacts{Name: "node-a", UID: "node-uid"}
}

func TestCheckRequest(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pod         func(*PodFacts) *PodFacts
		node        func(*NodeFacts) *NodeFacts
		wantReason  Reason // "" for no decision
		wantRecheck bool
		wantInMsg   []string
	}{
		{name: "matches"},
		{name: "pending pod", pod: func(p *PodFacts) *PodFacts { p.Phase = corev1.PodPending; return p }},
		{
			name: "pod not found", pod: func(*PodFacts) *PodFacts { return nil },
			wantReason: ReasonPodNotFound, wantRecheck: true, wantInMsg: []string{`"ns"/"web-0"`},
		},
		{
			name: "pod replaced", pod: func(p *PodFacts) *PodFacts { p.UID = "new-uid"; return p },
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{`spec.podUID is "pod-uid", the pod's UID is "new-uid"`},
		},
		{
			name: "pod on another node", pod: func(p *PodFacts) *PodFacts { p.NodeName = "node-b"; return p },
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{`spec.nodeName is "node-a", the pod's node is "node-b"`},
		},
		{
			name: "pod not scheduled in the cache", pod: func(p *PodFacts) *PodFacts { p.NodeName = ""; return p },
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{`the pod's node is ""`},
		},
		{
			name: "other service account", pod: func(p *PodFacts) *PodFacts { p.ServiceAccountName = "default"; return p },
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{`spec.serviceAccountName is "web", the pod's service account is "default"`},
		},
		{
			name: "every pod field differs",
			pod: func(p *PodFacts) *PodFacts {
				p.UID, p.NodeName, p.ServiceAccountName = "u2", "n2", "s2"
				return p
			},
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{"spec.podUID", "spec.nodeName", "spec.serviceAccountName"},
		},
		{
			name: "another pod looked up", pod: func(p *PodFacts) *PodFacts { p.Namespace, p.Name = "other", "web-1"; return p },
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{"metadata.namespace", "spec.podName"},
		},
		{
			name: "long value is cut", pod: func(p *PodFacts) *PodFacts { p.UID = types.UID("x" + strings.Repeat("y", 500)); return p },
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{`"…`},
		},
		{
			name: "pod succeeded", pod: func(p *PodFacts) *PodFacts { p.Phase = corev1.PodSucceeded; return p },
			wantReason: ReasonPodFinished, wantInMsg: []string{"Succeeded"},
		},
		{
			name: "pod failed", pod: func(p *PodFacts) *PodFacts { p.Phase = corev1.PodFailed; return p },
			wantReason: ReasonPodFinished, wantInMsg: []string{"Failed"},
		},
		{
			name: "replaced pod that finished is a mismatch",
			pod: func(p *PodFacts) *PodFacts {
				p.UID, p.Phase = "old-uid", corev1.PodSucceeded
				return p
			},
			wantReason: ReasonPodMismatch, wantRecheck: true,
		},
		{
			name: "node not found", node: func(*NodeFacts) *NodeFacts { return nil },
			wantReason: ReasonNodeNotFound, wantRecheck: true, wantInMsg: []string{`"node-a"`},
		},
		{
			name: "node replaced", node: func(n *NodeFacts) *NodeFacts { n.UID = "new-node-uid"; return n },
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{`spec.nodeUID is "node-uid", the node's UID is "new-node-uid"`},
		},
		{
			name: "another node looked up", node: func(n *NodeFacts) *NodeFacts { n.Name = "node-b"; return n },
			wantReason: ReasonPodMismatch, wantRecheck: true, wantInMsg: []string{`the node's name is "node-b"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, node := testPod(), testNode()
			if tc.pod != nil {
				pod = tc.pod(pod)
			}
			if tc.node != nil {
				node = tc.node(node)
			}
			d := CheckRequest(testRequest(), pod, node)
			if tc.wantReason == "" {
				if d != nil {
					t.Fatalf("decision %s: %s, want none", d.Reason, d.Message)
				}
				return
			}
			if d == nil {
				t.Fatalf("no decision, want %s", tc.wantReason)
			}
			if d.Reason != tc.wantReason || d.Type() != certificatesv1.PodCertificateRequestConditionTypeDenied || d.Recheck != tc.wantRecheck {
				t.Errorf("decision %s %s recheck %v, want Denied %s recheck %v", d.Type(), d.Reason, d.Recheck, tc.wantReason, tc.wantRecheck)
			}
			for _, s := range tc.wantInMsg {
				if !strings.Contains(d.Message, s) {
					t.Errorf("message %q does not contain %q", d.Message, s)
				}
			}
			if len(d.Message) > 400 {
				t.Errorf("message of %d bytes: long values are not cut", len(d.Message))
			}
		})
	}
}

func TestCheckRequestDeletingPod(t *testing.T) {
	pod := testPod()
	pod.Deleting = true
	d := CheckRequest(testRequest(), pod, testNode())
	if d == nil || d.Reason != ReasonPodDeleting || d.Recheck {
		t.Fatalf("CheckRequest of a pod being deleted = %+v, want a final %s", d, ReasonPodDeleting)
	}
	if want := `pod "ns"/"web-0" is being deleted`; d.Message != want {
		t.Errorf("message %q, want %q", d.Message, want)
	}
}

// TestCheckServiceAccount: a request whose spec.serviceAccountUID is not the service
// account's, as a creator that is not a node can make it, is denied after a recheck.
func TestCheckServiceAccount(t *testing.T) {
	req := testRequest()
	if d := CheckServiceAccount(req, "sa-uid", true); d != nil {
		t.Errorf("matching UID: %+v", d)
	}
	d := CheckServiceAccount(req, "other-uid", true)
	if d == nil || d.Reason != ReasonPodMismatch || !d.Recheck ||
		!strings.Contains(d.Message, `spec.serviceAccountUID is "sa-uid", the service account's UID is "other-uid"`) {
		t.Errorf("wrong UID: %+v", d)
	}
	d = CheckServiceAccount(req, "", false)
	if d == nil || d.Reason != ReasonPodMismatch || !d.Recheck || !strings.Contains(d.Message, `service account "ns"/"web" not found`) {
		t.Errorf("no service account: %+v", d)
	}
}
