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

package podcertificate

import (
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
)

// annotate makes a request name a ClusterSPIFFEID.
func annotate(req *certificatesv1.PodCertificateRequest, name string) {
	req.Spec.UnverifiedUserAnnotations = map[string]string{podcert.AnnotationClusterSPIFFEID: name}
}

// TestSyncRequestDeniesPodsWithoutIdentity: a pod that no ClusterSPIFFEID gives an identity,
// or not the one its request names, is denied, and the message says which ClusterSPIFFEID
// and why.
func TestSyncRequestDeniesPodsWithoutIdentity(t *testing.T) {
	runDenials(t, []denialCase{
		{
			name: "no ClusterSPIFFEID selects the pod",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.csid.Spec.PodSelector = selector(map[string]string{"app": "db"})
			},
			wantReason: podcert.ReasonNoIdentity, wantMessages: []string{"no ClusterSPIFFEID selects pod prod/web"},
		},
		{
			name: "no ClusterSPIFFEID at all",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.csid = nil
			},
			wantReason: podcert.ReasonNoIdentity, wantMessages: []string{"no ClusterSPIFFEID selects pod prod/web"},
		},
		{
			name: "the only ClusterSPIFFEID that selects the pod fails to render",
			setup: func(_ *testing.T, _ *testEnv, cl *cluster, _ *certificatesv1.PodCertificateRequest) {
				cl.csid.Spec.SPIFFEIDTemplate = "spiffe://elsewhere.org/{{ .PodMeta.Name }}"
			},
			wantReason:   podcert.ReasonNoIdentity,
			wantMessages: []string{"no ClusterSPIFFEID renders an identity for pod prod/web", "ClusterSPIFFEID web-identity: "},
		},
		{
			name:       "pod in an ignored namespace",
			options:    func(o *Options) { o.IgnoreNamespace = func(ns string) bool { return ns == "prod" } },
			wantReason: podcert.ReasonNoIdentity, wantMessages: []string{"pod prod/web", "namespace prod", "ignores"},
		},
		{
			name: "annotation names a ClusterSPIFFEID that does not exist",
			setup: func(_ *testing.T, _ *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				annotate(req, "no-such-identity")
			},
			wantReason: podcert.ReasonClusterSPIFFEIDNotApplicable, wantMessages: []string{"ClusterSPIFFEID no-such-identity does not exist"},
		},
		{
			name: "annotation names a ClusterSPIFFEID of another class",
			setup: func(t *testing.T, env *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				other := clusterSPIFFEID("other-class", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
					PodSelector: selector(map[string]string{"app": "web"}), ClassName: "other",
				})
				env.add(t, other)
				annotate(req, other.Name)
			},
			wantReason: podcert.ReasonClusterSPIFFEIDNotApplicable, wantMessages: []string{"ClusterSPIFFEID other-class does not exist", "class"},
		},
		{
			name: "annotation names a ClusterSPIFFEID that does not select the pod",
			setup: func(t *testing.T, env *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				db := clusterSPIFFEID("db-identity", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{PodSelector: selector(map[string]string{"app": "db"})})
				env.add(t, db)
				annotate(req, db.Name)
			},
			wantReason: podcert.ReasonClusterSPIFFEIDNotApplicable, wantMessages: []string{"ClusterSPIFFEID db-identity does not select pod prod/web"},
		},
		{
			name: "annotation names a fallback skipped because a regular one applies",
			setup: func(t *testing.T, env *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				fallback := clusterSPIFFEID("catch-all", 2*time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
					SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/default/{{ .PodMeta.Name }}", Fallback: true,
				})
				env.add(t, fallback)
				annotate(req, fallback.Name)
			},
			wantReason: podcert.ReasonClusterSPIFFEIDNotApplicable, wantMessages: []string{"ClusterSPIFFEID catch-all is a fallback"},
		},
		{
			name: "annotation names a ClusterSPIFFEID that fails to render",
			setup: func(t *testing.T, env *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				broken := clusterSPIFFEID("broken", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
					SPIFFEIDTemplate: "spiffe://elsewhere.org/{{ .PodMeta.Name }}", PodSelector: selector(map[string]string{"app": "web"}),
				})
				env.add(t, broken)
				annotate(req, broken.Name)
			},
			wantReason:   podcert.ReasonClusterSPIFFEIDNotApplicable,
			wantMessages: []string{"ClusterSPIFFEID broken renders no identity for pod prod/web", "ClusterSPIFFEID broken: "},
		},
		{
			name: "annotation value is not a ClusterSPIFFEID name",
			setup: func(_ *testing.T, _ *testEnv, _ *cluster, req *certificatesv1.PodCertificateRequest) {
				annotate(req, "Not_A_Name")
			},
			wantReason: podcert.ReasonInvalidUnverifiedUserAnnotations, wantMessages: []string{`"Not_A_Name"`},
		},
	})
}

// TestSyncRequestUsesFallback: a fallback ClusterSPIFFEID gives the identity when no regular
// one applies, with or without the annotation naming it.
func TestSyncRequestUsesFallback(t *testing.T) {
	for _, named := range []string{"", "catch-all"} {
		t.Run("annotation "+named, func(t *testing.T) {
			env := newTestEnv(t, envOptions{})
			cl := newCluster()
			cl.csid.Spec.PodSelector = selector(map[string]string{"app": "db"})
			fallback := clusterSPIFFEID("catch-all", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
				SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/default/{{ .PodMeta.Name }}", Fallback: true,
			})
			env.add(t, cl.ns, cl.node, cl.pod, cl.csid, fallback)
			key := newP256Key(t)
			req := kubeletRequest(t, cl.pod, cl.node, key)
			if named != "" {
				annotate(req, named)
			}
			env.add(t, req)
			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			checkIssued(t, env, req, key, "spiffe://example.org/default/web", nil)
		})
	}
}
