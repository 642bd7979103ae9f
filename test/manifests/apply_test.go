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

package manifests_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

// TestApplyStandalone checks that the API server accepted and stored every object of
// manifests/ (applied by cluster), and that applying them again changes nothing: no field is
// defaulted or normalised in a way that would make every apply a write.
func TestApplyStandalone(t *testing.T) {
	checkApplied(t, kustomize(t, "manifests"))
}

// TestApplyTCPMTLS is TestApplyStandalone for manifests/tcp-mtls, whose pod mounts a CSI volume.
// Both topologies name their objects alike (they replace each other), so the standalone ones
// are applied back for the package's other tests.
func TestApplyTCPMTLS(t *testing.T) {
	k := cluster(t)
	t.Cleanup(func() {
		if err := serverSideApply(context.Background(), k.RESTConfig(), kustomize(t, "manifests")); err != nil {
			t.Errorf("applying manifests/ back: %v", err)
		}
	})
	checkApplied(t, kustomize(t, "manifests", "tcp-mtls"))
}

// checkApplied checks that the API server accepted and stored every object of objs, applied by
// cluster or here, and that applying them again changes nothing.
func checkApplied(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	k := cluster(t)
	ctx := t.Context()
	if err := serverSideApply(ctx, k.RESTConfig(), objs); err != nil {
		t.Fatalf("applying: %v", err)
	}
	versions := map[string]string{}
	for _, o := range objs {
		got, err := getApplied(ctx, k.RESTConfig(), o)
		if err != nil {
			t.Fatal(err)
		}
		versions[id(o)] = specVersion(got)
	}
	if err := serverSideApply(ctx, k.RESTConfig(), objs); err != nil {
		t.Fatalf("applying again: %v", err)
	}
	for _, o := range objs {
		got, err := getApplied(ctx, k.RESTConfig(), o)
		if err != nil {
			t.Fatal(err)
		}
		if v := specVersion(got); v != versions[id(o)] {
			t.Errorf("%s changed when applied again: version %s, was %s", id(o), v, versions[id(o)])
		}
	}

	// What the API server stored still runs as non-root on a read-only root filesystem.
	stored, err := getApplied(ctx, k.RESTConfig(), find(t, objs, "Deployment", "spire-registrar"))
	if err != nil {
		t.Fatal(err)
	}
	d := typed[appsv1.Deployment](t, stored)
	sc := d.Spec.Template.Spec.Containers[0].SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("stored securityContext = %+v", sc)
	}
}

// specVersion identifies what an object declares: its generation where it has one, which
// status updates (a CRD becoming Established, say) leave alone; its resourceVersion otherwise.
func specVersion(o *unstructured.Unstructured) string {
	if g := o.GetGeneration(); g > 0 {
		return fmt.Sprintf("generation %d", g)
	}
	return "resourceVersion " + o.GetResourceVersion()
}

// TestApplySidecar applies the sidecar topology (the fixture SPIRE server with the component)
// and checks the server's ServiceAccount, which the sidecar runs as, got spire-registrar's
// permissions and nothing like write access to pods.
func TestApplySidecar(t *testing.T) {
	k := cluster(t)
	ctx := t.Context()
	objs := kustomize(t, "test", "manifests", "testdata", "sidecar")
	if err := serverSideApply(ctx, k.RESTConfig(), objs); err != nil {
		t.Fatal(err)
	}
	stored, err := getApplied(ctx, k.RESTConfig(), find(t, objs, "StatefulSet", "spire-server"))
	if err != nil {
		t.Fatal(err)
	}
	sts := typed[appsv1.StatefulSet](t, stored)
	container(t, &sts.Spec.Template.Spec, "spire-registrar")
	container(t, &sts.Spec.Template.Spec, "spire-server")

	kube, err := kubernetes.NewForConfig(k.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + namespace + ":spire-server"
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "spire.spiffe.io", Resource: "clusterspiffeids", Subresource: "status"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: namespace, Name: leaseName}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: namespace, Name: "another-controller"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "spire.spiffe.io", Resource: "clusterspiffeids"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "default"}, false},
	} {
		r, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
				ResourceAttributes: &tc.attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != tc.want {
			t.Errorf("%s may %s %s/%s %s: %v, want %v", user, tc.attrs.Verb, tc.attrs.Resource, tc.attrs.Subresource, tc.attrs.Name, r.Status.Allowed, tc.want)
		}
	}
}
