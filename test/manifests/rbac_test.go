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
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	spireapi "github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const serviceAccount = "spire-registrar"

// runs numbers TestLeastPrivilege's runs in this process.
var runs atomic.Int64

// forbiddenLog records every request the API server answered 403 Forbidden: a permission the
// controller needs but the ClusterRole lacks shows up here even when the controller only logs
// it (an Event it could not write, say).
type forbiddenLog struct {
	mu   sync.Mutex
	reqs []string
}

func (f *forbiddenLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			f.mu.Lock()
			f.reqs = append(f.reqs, req.Method+" "+req.URL.Path)
			f.mu.Unlock()
		}
		return resp, err
	})
}

func (f *forbiddenLog) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// serviceAccountConfig returns a client config that authenticates only with a fresh token of
// the spire-registrar ServiceAccount, as the Deployment's pod would, trusting the admin
// config's CA.
func serviceAccountConfig(t *testing.T, ctx context.Context, admin *rest.Config, forbidden *forbiddenLog) *rest.Config {
	t.Helper()
	return serviceAccountConfigFor(t, ctx, admin, namespace, serviceAccount, forbidden)
}

// serviceAccountConfigFor is serviceAccountConfig for any ServiceAccount.
func serviceAccountConfigFor(t *testing.T, ctx context.Context, admin *rest.Config, namespace, serviceAccount string, forbidden *forbiddenLog) *rest.Config {
	t.Helper()
	adminKube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := adminKube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", namespace, serviceAccount, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	cfg.UserAgent = "spire-registrar-deploy-test"
	if forbidden != nil {
		cfg.Wrap(forbidden.wrap)
	}

	// Make sure the requests really are the ServiceAccount's.
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	if want := "system:serviceaccount:" + namespace + ":" + serviceAccount; review.Status.UserInfo.Username != want {
		t.Fatalf("authenticated as %q, want %q", review.Status.UserInfo.Username, want)
	}
	return cfg
}

// shippedConfig returns the config the Deployment's ConfigMap ships, pointed at a test socket.
func shippedConfig(t *testing.T, socketPath string) *config.Config {
	t.Helper()
	cm := typed[corev1.ConfigMap](t, find(t, kustomize(t, "manifests"), "ConfigMap", "spire-registrar"))
	var file map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &file); err != nil {
		t.Fatal(err)
	}
	file["spireServerSocketPath"] = socketPath
	data, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("the shipped config: %v", err)
	}
	return cfg
}

// TestLeastPrivilege runs the controllers in-process as the spire-registrar ServiceAccount
// against the real API server and a real SPIRE server: the ClusterRole must be enough for
// them to do their whole job (entries, status, Events, leader election) without a single
// request being forbidden. Then it checks, request by request, that nothing more is allowed.
func TestLeastPrivilege(t *testing.T) {
	k := cluster(t)
	_, ctx := ktesting.NewTestContext(t)
	admin := k.RESTConfig()
	var forbidden forbiddenLog
	saConfig := serviceAccountConfig(t, ctx, admin, &forbidden)

	t.Run("the controllers run as the ServiceAccount", func(t *testing.T) {
		runControllersAsServiceAccount(t, ctx, admin, saConfig)
	})
	t.Run("leader election works as the ServiceAccount", func(t *testing.T) {
		electLeader(t, ctx, saConfig)
	})
	if got := forbidden.list(); len(got) > 0 {
		t.Errorf("the API server refused the ServiceAccount's requests (a permission is missing):\n  %s", strings.Join(got, "\n  "))
	}
	// The log itself works: a request the ServiceAccount may not make lands in it.
	saKube, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := saKube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets as the ServiceAccount: %v, want Forbidden", err)
	}
	if got := forbidden.list(); len(got) != 1 || !strings.Contains(got[0], "/secrets") {
		t.Errorf("forbidden requests recorded: %v, want the secrets list", got)
	}

	t.Run("access reviews", func(t *testing.T) {
		checkAccessReviews(t, ctx, saConfig)
	})
	t.Run("rules review", func(t *testing.T) {
		checkRulesReview(t, ctx, saConfig)
	})
}

// runControllersAsServiceAccount starts the controllers with the ServiceAccount's clients and
// the shipped config, then declares an identity as the admin and waits for its entry in SPIRE,
// its status and an Event about a broken identity.
func runControllersAsServiceAccount(t *testing.T, ctx context.Context, admin, saConfig *rest.Config) {
	s := realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	if fi, err := os.Stat(s.SocketPath()); err == nil {
		t.Logf("SPIRE admin socket mode: %v", fi.Mode())
	}
	cfg := shippedConfig(t, s.SocketPath())
	spireClient, err := spireapi.Dial(ctx, s.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spireClient.Close() })

	saKube, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	saSpire, err := spireclientset.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	runControllers(t, ctx, app.ControllerContext{Config: cfg, KubeClient: saKube, SpireAPIClient: saSpire, SPIRE: spireClient})

	// Everything declared by the admin, as a user would.
	adminKube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	adminSpire, err := spireclientset.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	// Names are unique per run, so that -count=2 reuses the shared API server cleanly.
	suffix := fmt.Sprint(runs.Add(1))
	appNamespace, webID, foreignID := "deploy-apps-"+suffix, "deploy-web-"+suffix, "deploy-foreign-"+suffix
	if _, err := adminKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: appNamespace, Labels: map[string]string{"team": suffix}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, err := realcluster.CreateNode(ctx, adminKube, "deploy-node-"+suffix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreatePod(ctx, adminKube, appNamespace, "web", node.Name); err != nil {
		t.Fatal(err)
	}
	nsSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"team": suffix}}
	if _, err := adminSpire.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: webID},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}",
			NamespaceSelector: nsSelector,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An identity outside the trust domain cannot be rendered: the controller says so in an Event.
	if _, err := adminSpire.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: foreignID},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate:  "spiffe://other.example/pod/{{ .PodMeta.Name }}",
			NamespaceSelector: nsSelector,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	wantID := "spiffe://example.org/ns/" + appNamespace + "/pod/web"
	eventually(t, ctx, "the entry in SPIRE", func() (bool, error) {
		entries, err := spireClient.ListEntries(ctx)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(entries, func(e *spiretypes.Entry) bool {
			return "spiffe://"+e.GetSpiffeId().GetTrustDomain()+e.GetSpiffeId().GetPath() == wantID
		}), nil
	})
	wantStats := spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 1, EntriesToSet: 1}
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	eventually(t, ctx, "the ClusterSPIFFEID status", func() (bool, error) {
		clusterSPIFFEID, err := adminSpire.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, webID, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		stats = clusterSPIFFEID.Status.Stats
		return stats == wantStats, nil
	})
	// Events about cluster-scoped objects go to the default namespace.
	eventually(t, ctx, "the RenderFailed Event", func() (bool, error) {
		events, err := adminKube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", foreignID).String()})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool { return e.Reason == "RenderFailed" }), nil
	})
}

// runControllers runs the controllers of cc as the binary runs them, app.Run with two workers,
// on informer factories of cc's clients, until the test ends, and waits until they are ready
// (their first sync done).
func runControllers(t *testing.T, ctx context.Context, cc app.ControllerContext) {
	t.Helper()
	runCtx, cancel := context.WithCancel(ctx)
	cc.KubeInformers, cc.SpireInformers = app.NewInformerFactories(cc.KubeClient, cc.SpireAPIClient)
	var health app.Health
	runErr := make(chan error, 1)
	go func() { runErr <- app.Run(runCtx, cc, 2, &health) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("app.Run: %v", err)
		}
	})
	start := time.Now()
	eventually(t, ctx, "controllers synced", func() (bool, error) {
		select {
		case err := <-runErr:
			runErr <- err
			return false, fmt.Errorf("app.Run returned early: %w", err)
		default:
		}
		return health.Ready() == nil, nil
	})
	t.Logf("controllers synced as the ServiceAccount in %v", time.Since(start).Round(time.Millisecond))
}

// electLeader acquires, renews and releases a Lease in spire-server with client-go's
// LeaseLock, the lock kube-controller-manager-style leader election uses.
func electLeader(t *testing.T, ctx context.Context, saConfig *rest.Config) {
	kube, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, "spire-registrar", kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: "deploy-test"})
	if err != nil {
		t.Fatal(err)
	}
	electCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var led atomic.Bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				led.Store(true)
				// Stay long enough to renew the Lease once, then release it.
				select {
				case <-time.After(1500 * time.Millisecond):
				case <-ctx.Done():
				}
				cancel()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	elector.Run(electCtx)
	if !led.Load() {
		t.Fatalf("never became leader")
	}
	lease, err := kube.CoordinationV1().Leases(namespace).Get(ctx, "spire-registrar", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease back: %v", err)
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "" {
		t.Errorf("Lease still held by %q after release", holder)
	}
}

// access is one request to review.
type access struct {
	verb, group, resource, subresource, namespace string
	// name, if set, asks about one object by name.
	name string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.name != "" {
		r += " " + a.name
	}
	ns := a.namespace
	if ns == "" {
		ns = "(all namespaces)"
	}
	return fmt.Sprintf("%s %s in %s", a.verb, r, ns)
}

func accesses(verbs []string, group string, resources []string, subresource, ns string) []access {
	var out []access
	for _, r := range resources {
		for _, v := range verbs {
			out = append(out, access{verb: v, group: group, resource: r, subresource: subresource, namespace: ns})
		}
	}
	return out
}

// named asks about the object called name in each of as.
func named(as []access, name string) []access {
	for i := range as {
		as[i].name = name
	}
	return as
}

// checkAccessReviews asks the API server, as the ServiceAccount, about what it must and must
// not be allowed to do; granted are accesses a component grants on top, no longer denied.
func checkAccessReviews(t *testing.T, ctx context.Context, saConfig *rest.Config, granted ...access) {
	kube, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	ours := []string{"clusterspiffeids", "clusterstaticentries", "clusterfederatedtrustdomains"}
	read := []string{"get", "list", "watch"}
	var allowed []access
	allowed = append(allowed, accesses(read, "", []string{"pods", "namespaces", "nodes"}, "", "")...)
	allowed = append(allowed, accesses(read, "", []string{"pods"}, "", "default")...)
	allowed = append(allowed, accesses(read, "discovery.k8s.io", []string{"endpointslices"}, "", "")...)
	allowed = append(allowed, accesses(read, "spire.spiffe.io", ours, "", "")...)
	allowed = append(allowed, accesses([]string{"update", "patch"}, "spire.spiffe.io", ours, "status", "")...)
	allowed = append(allowed, accesses([]string{"create", "patch"}, "", []string{"events"}, "", metav1.NamespaceDefault)...)
	allowed = append(allowed, accesses([]string{"create", "patch"}, "events.k8s.io", []string{"events"}, "", metav1.NamespaceDefault)...)
	allowed = append(allowed, accesses([]string{"create"}, "coordination.k8s.io", []string{"leases"}, "", namespace)...)
	allowed = append(allowed, named(accesses([]string{"get", "update"}, "coordination.k8s.io", []string{"leases"}, "", namespace), leaseName)...)

	write := []string{"create", "update", "patch", "delete", "deletecollection"}
	var denied []access
	denied = append(denied, accesses(write, "", []string{"pods"}, "", "default")...)
	denied = append(denied, accesses([]string{"update", "patch"}, "", []string{"pods"}, "status", "default")...)
	denied = append(denied, accesses([]string{"create"}, "", []string{"pods"}, "exec", "default")...)
	denied = append(denied, accesses([]string{"create"}, "", []string{"pods"}, "eviction", "default")...)
	denied = append(denied, accesses(read, "", []string{"secrets"}, "", "")...)
	denied = append(denied, accesses(read, "", []string{"secrets", "configmaps", "serviceaccounts"}, "", namespace)...)
	denied = append(denied, accesses([]string{"create"}, "", []string{"serviceaccounts"}, "token", namespace)...)
	denied = append(denied, accesses([]string{"list"}, "", []string{"services", "endpoints"}, "", "")...)
	denied = append(denied, accesses(write, "", []string{"namespaces", "nodes"}, "", "")...)
	denied = append(denied, accesses(write, "spire.spiffe.io", ours, "", "")...)
	denied = append(denied, accesses([]string{"get"}, "spire.spiffe.io", ours, "status", "")...)
	denied = append(denied, accesses([]string{"update", "delete", "list"}, "", []string{"events"}, "", metav1.NamespaceDefault)...)
	denied = append(denied, accesses([]string{"list", "delete", "patch", "get", "update"}, "coordination.k8s.io", []string{"leases"}, "", namespace)...)
	// Another controller's Lease, such as spire-controller-manager's beside it during a swap.
	denied = append(denied, named(accesses([]string{"get", "update", "patch", "delete"}, "coordination.k8s.io", []string{"leases"}, "", namespace),
		"spire-controller-manager-leader-election")...)
	denied = append(denied, accesses([]string{"get", "update"}, "coordination.k8s.io", []string{"leases"}, "", "kube-system")...)
	denied = append(denied, accesses(write, "apiextensions.k8s.io", []string{"customresourcedefinitions"}, "", "")...)
	denied = append(denied, accesses([]string{"create", "escalate", "bind"}, "rbac.authorization.k8s.io", []string{"clusterroles", "clusterrolebindings"}, "", "")...)
	denied = append(denied, accesses([]string{"impersonate"}, "", []string{"users", "serviceaccounts"}, "", "")...)
	denied = append(denied, accesses([]string{"create"}, "authentication.k8s.io", []string{"tokenreviews"}, "", "")...)
	denied = append(denied, accesses([]string{"*"}, "*", []string{"*"}, "", "")...)
	denied = slices.DeleteFunc(denied, func(a access) bool { return slices.Contains(granted, a) })

	checkAllowedDenied(t, ctx, kube, allowed, denied)
}

// checkAllowedDenied asks the API server, as kube's user, about each access: those in allowed
// must be allowed, those in denied refused.
func checkAllowedDenied(t *testing.T, ctx context.Context, kube kubernetes.Interface, allowed, denied []access) {
	t.Helper()
	for _, a := range allowed {
		if !selfReview(t, ctx, kube, a) {
			t.Errorf("denied, but the controller needs it: %s", a)
		}
	}
	for _, a := range denied {
		if selfReview(t, ctx, kube, a) {
			t.Errorf("allowed, but it must not be: %s", a)
		}
	}
	t.Logf("%d accesses allowed and %d denied as expected", len(allowed), len(denied))
}

// selfReview reports whether kube's user may make the access, by a SelfSubjectAccessReview.
func selfReview(t *testing.T, ctx context.Context, kube kubernetes.Interface, a access) bool {
	t.Helper()
	r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.namespace, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Name: a.name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectAccessReview %s: %v", a, err)
	}
	return r.Status.Allowed
}

// checkRulesReview lists every rule the ServiceAccount has in spire-server and requires each
// to be one of spire-registrar's, one of extra (the rules of an optional component bound to
// it) or one every authenticated user has.
func checkRulesReview(t *testing.T, ctx context.Context, saConfig *rest.Config, extra ...rbacv1.PolicyRule) {
	kube, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	r, err := kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.Incomplete {
		t.Fatalf("rules review incomplete: %s", r.Status.EvaluationError)
	}
	expected := map[string]bool{}
	add := func(rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						expected[g+"|"+res+"|"+v+"|"+strings.Join(rule.ResourceNames, ",")] = true
					}
				}
			}
		}
	}
	add(wantClusterRoleRules)
	add(wantLeaderElectionRules)
	add(extra)
	// What the default policy gives every authenticated user: asking what one may do
	// (system:basic-user) and reading ClusterTrustBundles, which hold public CA certificates.
	add([]rbacv1.PolicyRule{
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}, Verbs: []string{"get", "list", "watch"}},
	})
	for _, rule := range r.Status.ResourceRules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if !expected[g+"|"+res+"|"+v+"|"+strings.Join(rule.ResourceNames, ",")] {
						t.Errorf("the ServiceAccount may %s %s %v in group %q, which spire-registrar does not need", v, res, rule.ResourceNames, g)
					}
				}
			}
		}
	}
}

// eventually polls cond every 50ms for up to 60s.
func eventually(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
	}
}
