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

package entry

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

type testEnv struct {
	ctx        context.Context
	controller *Controller
	spire      *spiretest.Server
	// client is the controller's connection to the SPIRE fake.
	client   *spire.Client
	kube     *k8sfake.Clientset
	spireAPI *spirefake.Clientset
	// podStore is the pod informer's cache, as the controller's informer holds it.
	podStore cache.Store
}

// envOptions change how newTestEnvWith builds the controller.
type envOptions struct {
	// wrapSPIRE, when set, stands between the controller and the SPIRE fake.
	wrapSPIRE func(spire.API) spire.EntryClient
	// kubeClient passes the Kubernetes clientset to the controller, which then records
	// Events to it.
	kubeClient bool
	dryRun     bool
	// ignoreNamespace, when set, is the controller's IgnoreNamespace.
	ignoreNamespace func(string) bool
	// trimmedPods caches pods as informercache.NewTrim keeps them, as the binary does.
	trimmedPods bool
}

// newTestEnv builds a controller over fake clientsets with running informers and the
// in-process SPIRE fake, without starting its workers: tests drive syncs directly.
func newTestEnv(t *testing.T, kubeObjects []runtime.Object, spireObjects ...runtime.Object) *testEnv {
	t.Helper()
	return newTestEnvWith(t, envOptions{}, kubeObjects, spireObjects...)
}

func newTestEnvWith(t *testing.T, o envOptions, kubeObjects []runtime.Object, spireObjects ...runtime.Object) *testEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	env := &testEnv{
		ctx:      ctx,
		spire:    spiretest.New(t),
		kube:     k8sfake.NewClientset(kubeObjects...),
		spireAPI: spirefake.NewSimpleClientset(spireObjects...),
	}
	client, err := spire.Dial(ctx, env.spire.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	env.client = client
	var spireClient spire.EntryClient = client
	if o.wrapSPIRE != nil {
		spireClient = o.wrapSPIRE(client)
	}
	var kubeClient kubernetes.Interface
	if o.kubeClient {
		kubeClient = env.kube
	}

	var kubeOptions []informers.SharedInformerOption
	if o.trimmedPods {
		kubeOptions = append(kubeOptions, informers.WithTransform(informercache.NewTrim()))
	}
	kubeInformers := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, kubeOptions...)
	spireInformers := spireinformers.NewSharedInformerFactory(env.spireAPI, 0)
	env.controller, err = NewController(ctx,
		kubeInformers.Core().V1().Pods(), kubeInformers.Core().V1().Namespaces(), kubeInformers.Core().V1().Nodes(),
		kubeInformers.Discovery().V1().EndpointSlices(),
		spireInformers.Spire().V1alpha1().ClusterSPIFFEIDs(), spireInformers.Spire().V1alpha1().ClusterStaticEntries(),
		kubeClient, env.kube.CoreV1(), env.spireAPI, spireClient,
		Options{
			Settings: render.Settings{
				TrustDomain:      spiffeid.RequireTrustDomainFromString("example.org"),
				ClusterName:      "demo",
				ParentIDTemplate: "spiffe://{{ .TrustDomain }}/k8s-node/{{ .NodeMeta.Name }}",
			},
			ResyncInterval:  time.Hour,
			Options:         reconciler.Options{DryRun: o.dryRun},
			IgnoreNamespace: o.ignoreNamespace,
		})
	if err != nil {
		t.Fatal(err)
	}
	env.podStore = kubeInformers.Core().V1().Pods().Informer().GetStore()
	kubeInformers.Start(ctx.Done())
	spireInformers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), env.controller.cachesSynced...) {
		t.Fatal("caches did not sync")
	}
	t.Cleanup(func() { cancel(); kubeInformers.Shutdown(); spireInformers.Shutdown() })
	return env
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: ktypes.UID("uid-" + name)}}
}

func pod(ns, name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: ktypes.UID("uid-" + ns + "-" + name), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: nodeName, ServiceAccountName: name},
	}
}

func clusterSPIFFEID(name string, age time.Duration, spec spirev1alpha1.ClusterSPIFFEIDSpec) *spirev1alpha1.ClusterSPIFFEID {
	return &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: ktypes.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(time.Now().Add(-age))},
		Spec:       spec,
	}
}

func selector(labels map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels}
}

// walkThroughClusterSPIFFEIDs are the two ClusterSPIFFEIDs of the reconcile walk-through.
func walkThroughClusterSPIFFEIDs() []runtime.Object {
	const tmpl = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"
	selectors := []string{"k8s:ns:{{ .PodMeta.Namespace }}", "k8s:sa:{{ .PodSpec.ServiceAccountName }}"}
	return []runtime.Object{
		clusterSPIFFEID("web-server-identity", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: tmpl, NamespaceSelector: selector(map[string]string{"env": "production"}),
			PodSelector:      selector(map[string]string{"app": "web-server"}),
			DNSNameTemplates: []string{"web.example.com", "web-new.example.com"}, WorkloadSelectorTemplates: selectors,
		}),
		clusterSPIFFEID("api-server-identity", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{
			SPIFFEIDTemplate: tmpl, NamespaceSelector: selector(map[string]string{"env": "development"}),
			PodSelector: selector(map[string]string{"app": "api-server"}), WorkloadSelectorTemplates: selectors,
		}),
	}
}

func TestFullResyncWalkThrough(t *testing.T) {
	web := pod("production", "web-server", "node-1", map[string]string{"app": "web-server"})
	api := pod("development", "api-server", "node-3", map[string]string{"app": "api-server"})
	env := newTestEnv(t, []runtime.Object{
		namespace("production", map[string]string{"env": "production"}),
		namespace("development", map[string]string{"env": "development"}),
		node("node-1"), node("node-3"), web, api,
	}, walkThroughClusterSPIFFEIDs()...)
	env.spire.SetEntries(
		&spiretypes.Entry{Id: "entry-123", SpiffeId: sid("/ns/production/sa/web-server"), ParentId: sid("/k8s-node/node-1"),
			Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:" + string(web.UID)}, {Type: "k8s", Value: "ns:production"}, {Type: "k8s", Value: "sa:web-server"}},
			DnsNames:  []string{"web.example.com"}},
		&spiretypes.Entry{Id: "entry-456", SpiffeId: sid("/ns/staging/sa/old-app"), ParentId: sid("/k8s-node/node-2"),
			Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "ns:staging"}, {Type: "k8s", Value: "sa:old-app"}}},
	)

	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatalf("fullResync: %v", err)
	}

	// The web-server entry keeps its ID and gains the new DNS name; the api-server entry is
	// created; entry-456, which nothing declares, is deleted.
	podSelectors := func(pod *corev1.Pod, ns, sa string) []*spiretypes.Selector {
		return []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:" + string(pod.UID)}, {Type: "k8s", Value: "ns:" + ns}, {Type: "k8s", Value: "sa:" + sa}}
	}
	want := []*spiretypes.Entry{
		{Id: "entry-123", SpiffeId: sid("/ns/production/sa/web-server"), ParentId: sid("/k8s-node/node-1"),
			Selectors: podSelectors(web, "production", "web-server"), DnsNames: []string{"web.example.com", "web-new.example.com"}},
		{SpiffeId: sid("/ns/development/sa/api-server"), ParentId: sid("/k8s-node/node-3"),
			Selectors: podSelectors(api, "development", "api-server")},
	}
	got := env.spire.Entries()
	slices.SortFunc(got, func(a, b *spiretypes.Entry) int {
		return strings.Compare(b.GetSpiffeId().GetPath(), a.GetSpiffeId().GetPath())
	})
	// SPIRE chooses new IDs and stamps its own bookkeeping fields.
	ignore := protocmp.IgnoreFields(&spiretypes.Entry{}, "created_at", "revision_number")
	if len(got) == 2 && got[1].GetId() != "" {
		want[1].Id = got[1].GetId()
	}
	if diff := cmp.Diff(want, got, protocmp.Transform(), ignore); diff != "" {
		t.Errorf("SPIRE entries after the resync (-want +got):\n%s", diff)
	}

	for _, name := range []string{"web-server-identity", "api-server-identity"} {
		if err := env.controller.syncClusterSPIFFEIDStatus(env.ctx, name); err != nil {
			t.Fatalf("syncClusterSPIFFEIDStatus(%s): %v", name, err)
		}
		got, err := env.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(env.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 1, EntriesToSet: 1}
		if diff := cmp.Diff(want, got.Status.Stats); diff != "" {
			t.Errorf("%s stats (-want +got):\n%s", name, diff)
		}
	}

	// Nothing changed: a second resync lists but writes nothing.
	env.spire.ResetCalls()
	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatalf("second fullResync: %v", err)
	}
	if n := env.spire.WriteCalls(); n != 0 {
		t.Errorf("second resync made %d SPIRE writes, want 0", n)
	}
}

func TestSyncPodFollowsThePod(t *testing.T) {
	web := pod("production", "web-server", "node-1", map[string]string{"app": "web-server"})
	env := newTestEnv(t, []runtime.Object{namespace("production", map[string]string{"env": "production"}), node("node-1")},
		walkThroughClusterSPIFFEIDs()...)
	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatal(err)
	}

	// A new pod: its entry is created by a pod sync alone, without listing SPIRE.
	if _, err := env.kube.CoreV1().Pods("production").Create(env.ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPod(t, env, web.UID, true)
	env.spire.ResetCalls()
	if err := env.controller.syncPod(env.ctx, web.UID); err != nil {
		t.Fatalf("syncPod: %v", err)
	}
	if got := len(env.spire.Entries()); got != 1 {
		t.Fatalf("entries = %d, want 1", got)
	}
	if n := env.spire.Calls(spiretest.MethodListEntries); n != 0 {
		t.Errorf("pod sync listed SPIRE %d times, want 0", n)
	}

	// Syncing again changes nothing.
	env.spire.ResetCalls()
	if err := env.controller.syncPod(env.ctx, web.UID); err != nil {
		t.Fatal(err)
	}
	if n := env.spire.WriteCalls(); n != 0 {
		t.Errorf("idle pod sync wrote %d times", n)
	}

	// A failed write is an error to retry, and leaves SPIRE as it was.
	if err := env.kube.CoreV1().Pods("production").Delete(env.ctx, web.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPod(t, env, web.UID, false)
	env.spire.FailNext(spiretest.MethodBatchDeleteEntry, 1, codes.Unavailable)
	if err := env.controller.syncPod(env.ctx, web.UID); err == nil {
		t.Errorf("syncPod succeeded while SPIRE failed")
	}
	if got := len(env.spire.Entries()); got != 1 {
		t.Errorf("entries = %d after a failed delete, want 1", got)
	}
	// The retry deletes the entry of the deleted pod.
	if err := env.controller.syncPod(env.ctx, web.UID); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := len(env.spire.Entries()); got != 0 {
		t.Errorf("entries = %d after the pod was deleted, want 0", got)
	}
}

func TestFailedListDeletesNothing(t *testing.T) {
	env := newTestEnv(t, nil)
	env.spire.SetEntries(podEntry("", "gone-1", "/a"), podEntry("", "gone-2", "/b"))
	env.client.PageSize = 1
	env.spire.FailListAfterPages(1)
	if err := env.controller.fullResync(env.ctx); err == nil {
		t.Fatal("fullResync succeeded with a broken list")
	}
	if got := len(env.spire.Entries()); got != 2 {
		t.Errorf("entries = %d after a failed list, want 2 (no deletes)", got)
	}
	if n := env.spire.WriteCalls(); n != 0 {
		t.Errorf("a failed list led to %d writes", n)
	}
}

func sid(path string) *spiretypes.SPIFFEID {
	return &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: path}
}

func podEntry(id, uid, path string) *spiretypes.Entry {
	return &spiretypes.Entry{Id: id, SpiffeId: sid(path), ParentId: sid("/node"),
		Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:" + uid}}}
}

func waitForPod(t *testing.T, env *testEnv, uid ktypes.UID, present bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, found, _ := env.controller.pods.ByUID(uid); found == present {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pod %s present=%v never observed", uid, present)
}

// oldServer is a SPIRE server of a version that does not keep entry hints: it drops them from
// everything it answers, as such a server's API would.
type oldServer struct {
	spire.API
}

func dropHints(es []*spiretypes.Entry) {
	for _, e := range es {
		if e != nil {
			e.Hint = ""
		}
	}
}

func (s oldServer) ListEntries(ctx context.Context) ([]*spiretypes.Entry, error) {
	es, err := s.API.ListEntries(ctx)
	dropHints(es)
	return es, err
}

func (s oldServer) CreateEntries(ctx context.Context, es []*spiretypes.Entry) ([]spire.EntryResult, error) {
	rs, err := s.API.CreateEntries(ctx, es)
	for _, r := range rs {
		dropHints([]*spiretypes.Entry{r.Entry})
	}
	return rs, err
}

func (s oldServer) UpdateEntries(ctx context.Context, es []*spiretypes.Entry, m *spiretypes.EntryMask) ([]spire.EntryResult, error) {
	rs, err := s.API.UpdateEntries(ctx, es, m)
	for _, r := range rs {
		dropHints([]*spiretypes.Entry{r.Entry})
	}
	return rs, err
}

// TestFieldsTheServerDropsCauseNoUpdates: against a server that does not keep hints, the
// controller learns it from its first write's echo and stops comparing hints, instead of
// updating the entry at every sync; it writes no probe entry to find out.
func TestFieldsTheServerDropsCauseNoUpdates(t *testing.T) {
	web := pod("production", "web-server", "node-1", map[string]string{"app": "web-server"})
	all := walkThroughClusterSPIFFEIDs()
	all[0].(*spirev1alpha1.ClusterSPIFFEID).Spec.Hint = "web"
	env := newTestEnvWith(t, envOptions{wrapSPIRE: func(api spire.API) spire.EntryClient { return oldServer{API: api} }},
		[]runtime.Object{namespace("production", map[string]string{"env": "production"}), node("node-1"), web}, all...)

	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatal(err)
	}
	if n := env.spire.WriteCalls(); n != 1 {
		t.Fatalf("first resync made %d writes, want exactly the one create", n)
	}
	env.spire.ResetCalls()
	for range 3 {
		if err := env.controller.fullResync(env.ctx); err != nil {
			t.Fatal(err)
		}
		if err := env.controller.syncPod(env.ctx, web.UID); err != nil {
			t.Fatal(err)
		}
	}
	if n := env.spire.WriteCalls(); n != 0 {
		t.Errorf("%d writes after the server was seen to drop hints, want 0", n)
	}
}

// TestRefusedWriteDoesNotBlockTheController: SPIRE refusing one entry at the initial resync
// must neither fail the resync (readiness) nor stop the other pods from being served; the
// refused pod is retried on its own.
func TestRefusedWriteDoesNotBlockTheController(t *testing.T) {
	a := pod("production", "a", "node-1", map[string]string{"app": "web-server"})
	env := newTestEnv(t, []runtime.Object{namespace("production", map[string]string{"env": "production"}), node("node-1"), a},
		walkThroughClusterSPIFFEIDs()...)
	env.spire.FailNext(spiretest.MethodBatchCreateEntry, 1, codes.Internal)
	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatalf("a refused write failed the resync: %v", err)
	}
	// The retry is rate limited: it shows in the queue once its backoff elapsed.
	deadline := time.Now().Add(5 * time.Second)
	for env.controller.podQueue.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	uid, _ := env.controller.podQueue.Get()
	if uid != a.UID {
		t.Fatalf("retried key = %q, want the refused pod %q", uid, a.UID)
	}
	if err := env.controller.syncPod(env.ctx, uid); err != nil {
		t.Fatalf("retry: %v", err)
	}
	env.controller.podQueue.Done(uid)
	if got := len(env.spire.Entries()); got != 1 {
		t.Errorf("entries after the retry = %d, want 1", got)
	}
}

// renderFailures reads the render_failures_total counter of a kind.
func renderFailures(t *testing.T, kind string) float64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.RenderFailures.WithLabelValues(kind).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestRenderFailuresAreCounted: every ClusterSPIFFEID that cannot render a pod's entry and
// every invalid ClusterStaticEntry counts once per render in render_failures_total.
func TestRenderFailuresAreCounted(t *testing.T) {
	web := pod("production", "web-server", "node-1", map[string]string{"app": "web-server"})
	broken := clusterSPIFFEID("broken", time.Minute, spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://evil.org/x"})
	invalid := &spirev1alpha1.ClusterStaticEntry{ObjectMeta: metav1.ObjectMeta{Name: "invalid"},
		Spec: spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/db"}}
	env := newTestEnv(t, []runtime.Object{namespace("production", map[string]string{"env": "production"}), node("node-1"), web},
		append(walkThroughClusterSPIFFEIDs(), broken, invalid)...)

	type counts struct{ ClusterSPIFFEID, ClusterStaticEntry float64 }
	read := func() counts {
		return counts{renderFailures(t, render.KindClusterSPIFFEID), renderFailures(t, render.KindClusterStaticEntry)}
	}
	before := read()
	if err := env.controller.fullResync(env.ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.controller.syncPod(env.ctx, web.UID); err != nil {
		t.Fatal(err)
	}
	after := read()
	got := counts{after.ClusterSPIFFEID - before.ClusterSPIFFEID, after.ClusterStaticEntry - before.ClusterStaticEntry}
	// The resync renders both; the pod sync renders the pod's ClusterSPIFFEIDs again.
	if diff := cmp.Diff(counts{ClusterSPIFFEID: 2, ClusterStaticEntry: 1}, got); diff != "" {
		t.Errorf("render failures counted (-want +got):\n%s", diff)
	}
}
