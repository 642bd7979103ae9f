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

package restore

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// createWorld creates what both tests declare besides pods and trust domains: one node, and a
// ClusterSPIFFEID that gives every pod an entry of its own.
func createWorld(ctx context.Context, t *testing.T, stack *realcluster.Stack) *corev1.Node {
	t.Helper()
	node, err := realcluster.CreateNode(ctx, stack.Client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return node
}

// createPartner declares a federation with the trust domain <name>.org.
func createPartner(ctx context.Context, t *testing.T, stack *realcluster.Stack, name string) {
	t.Helper()
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().Create(ctx, &spirev1alpha1.ClusterFederatedTrustDomain{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: spirev1alpha1.ClusterFederatedTrustDomainSpec{TrustDomain: name + ".org", BundleEndpointURL: "https://127.0.0.1:1/bundle",
			BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSWebProfileType}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createPods creates n pods <prefix>-<i> in default on node, records them in declared and
// returns their UIDs.
func createPods(ctx context.Context, t *testing.T, stack *realcluster.Stack, node *corev1.Node, declared want, prefix string, n int) []types.UID {
	t.Helper()
	var uids []types.UID
	for i := range n {
		p, err := realcluster.CreatePod(ctx, stack.Client, "default", fmt.Sprintf("%s-%d", prefix, i), node.Name)
		if err != nil {
			t.Fatal(err)
		}
		declared.pods[p.UID] = p.Name
		uids = append(uids, p.UID)
	}
	return uids
}
