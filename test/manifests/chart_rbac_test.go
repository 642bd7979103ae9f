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
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	spireapi "github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// chartClusterRoleRules are the rules of the ClusterRole the official SPIRE Helm chart
// (spiffe/helm-charts-hardened, charts/spire/charts/spire-server/templates/
// controller-manager-roles.yaml, as of 2026-08) binds to the spire-server ServiceAccount that
// spire-controller-manager runs as, with its webhook enabled. It grants v1 Endpoints and not
// EndpointSlices, and no Events outside the server's namespace.
func chartClusterRoleRules() []rbacv1.PolicyRule {
	read := []string{"get", "list", "watch"}
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, Verbs: []string{"get", "list", "patch", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read},
	}
	for _, kind := range []string{"clusterfederatedtrustdomains", "clusterspiffeids", "clusterstaticentries"} {
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{spirev1alpha1.GroupName}, Resources: []string{kind}, Verbs: all},
			rbacv1.PolicyRule{APIGroups: []string{spirev1alpha1.GroupName}, Resources: []string{kind + "/finalizers"}, Verbs: []string{"update"}},
			rbacv1.PolicyRule{APIGroups: []string{spirev1alpha1.GroupName}, Resources: []string{kind + "/status"}, Verbs: []string{"get", "patch", "update"}})
	}
	return rules
}

// TestChartRBACIsEnough swaps the image as a chart user does: spire-registrar runs with only
// the chart's ClusterRole. It finds it may not read EndpointSlices, reads v1 Endpoints as
// spire-controller-manager does, and gives a pod its entry with the DNS names of the Service
// whose Endpoints list it. It finds it may not write Events where those about cluster-scoped
// resources go, and only logs them. No request is refused.
func TestChartRBACIsEnough(t *testing.T) {
	k := cluster(t)
	_, ctx := ktesting.NewTestContext(t)
	admin := k.RESTConfig()
	adminKube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	adminSpire, err := spireclientset.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprint(runs.Add(1))
	serverNamespace, appNamespace := "chart-spire-server-"+suffix, "chart-apps-"+suffix
	for _, ns := range []string{serverNamespace, appNamespace} {
		if _, err := adminKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{"chart-test": suffix}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const sa = "spire-server"
	if _, err := adminKube.CoreV1().ServiceAccounts(serverNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	roleName := serverNamespace + "-spire-controller-manager"
	if _, err := adminKube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: chartClusterRoleRules()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminKube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: serverNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var forbidden forbiddenLog
	saConfig := serviceAccountConfigFor(t, ctx, admin, serverNamespace, sa, &forbidden)
	saKube, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	saSpire, err := spireclientset.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}

	// RBAC takes a moment to reach the authorizer's cache.
	eventually(t, ctx, "the chart's ClusterRole in force", func() (bool, error) {
		pods, err := saKube.CoreV1().Pods(appNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && pods != nil, nil
	})

	s := realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	spireClient, err := spireapi.Dial(ctx, s.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spireClient.Close() })
	cfg, err := config.Parse([]byte(fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: chart
clusterDomain: cluster.local
className: chart-%s
spireServerSocketPath: %s
`, suffix, s.SocketPath())))
	if err != nil {
		t.Fatal(err)
	}
	// As the binary decides, from what the ServiceAccount may do.
	cc := app.ControllerContext{Config: cfg, KubeClient: saKube, SpireAPIClient: saSpire, SPIRE: spireClient}
	app.AdaptToPermissions(ctx, &cc)
	if !cc.ReadEndpoints {
		t.Fatalf("with the chart's ClusterRole, EndpointSlices are read; this test no longer tests the Endpoints fallback")
	}
	if !cc.EventsOnlyLogged {
		t.Fatalf("with the chart's ClusterRole, Events are written; this test no longer tests logging them")
	}
	runControllers(t, ctx, cc)

	node, err := realcluster.CreateNode(ctx, adminKube, "chart-node-"+suffix)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := realcluster.CreatePod(ctx, adminKube, appNamespace, "web-0", node.Name)
	if err != nil {
		t.Fatal(err)
	}
	// Written by hand, as the Endpoints controller would for a Service "web" over the pod.
	//nolint:staticcheck // v1 Endpoints are what the chart's RBAC grants.
	if _, err := adminKube.CoreV1().Endpoints(appNamespace).Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.7", TargetRef: &corev1.ObjectReference{
				Kind: "Pod", Namespace: appNamespace, Name: pod.Name, UID: pod.UID}}},
			Ports: []corev1.EndpointPort{{Port: 80}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminSpire.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "chart-web-" + suffix},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			ClassName:            "chart-" + suffix,
			SPIFFEIDTemplate:     "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}",
			NamespaceSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: appNamespace}},
			AutoPopulateDNSNames: true,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// An identity outside the trust domain cannot be rendered: its Event is only logged.
	if _, err := adminSpire.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "chart-foreign-" + suffix},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			ClassName:         "chart-" + suffix,
			SPIFFEIDTemplate:  "spiffe://other.example/pod/{{ .PodMeta.Name }}",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: appNamespace}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantDNS := []string{"web", "web." + appNamespace, "web." + appNamespace + ".svc", "web." + appNamespace + ".svc.cluster.local"}
	var got *spiretypes.Entry
	eventually(t, ctx, "the pod's entry with the Service's DNS names", func() (bool, error) {
		entries, err := spireClient.ListEntries(ctx)
		if err != nil {
			return false, err
		}
		for _, e := range entries {
			if e.GetSpiffeId().GetPath() == "/ns/"+appNamespace+"/pod/web-0" {
				got = e
				return slices.Equal(e.GetDnsNames(), wantDNS), nil
			}
		}
		return false, nil
	})
	if diff := cmp.Diff(wantDNS, got.GetDnsNames()); diff != "" {
		t.Errorf("DNS names of the pod's entry (-want +got):\n%s", diff)
	}
	eventually(t, ctx, "the foreign ClusterSPIFFEID's render failure in its status", func() (bool, error) {
		c, err := adminSpire.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, "chart-foreign-"+suffix, metav1.GetOptions{})
		return err == nil && c.Status.Stats.PodEntryRenderFailures > 0, nil
	})
	if refused := forbidden.list(); len(refused) > 0 {
		t.Errorf("requests the chart's ClusterRole refused:\n  %s", strings.Join(refused, "\n  "))
	}
}
