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

package federation

import (
	"bytes"
	"context"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

type testEnv struct {
	t        *testing.T
	ctx      context.Context
	c        *Controller
	spire    *spiretest.Server
	api      *spirefake.Clientset
	factory  spireinformers.SharedInformerFactory
	recorder *record.FakeRecorder
}

// newTestEnv builds a controller over fake clientsets and the in-process SPIRE fake without
// starting its informer or workers: tests seed the informer's indexer and drive syncs
// directly.
func newTestEnv(t *testing.T, objs ...*spirev1alpha1.ClusterFederatedTrustDomain) *testEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	env := &testEnv{t: t, ctx: ctx, spire: spiretest.New(t), api: spirefake.NewSimpleClientset()}
	client := dial(ctx, t, env.spire.SocketPath())

	env.factory = spireinformers.NewSharedInformerFactory(env.api, 0)
	var err error
	env.c, err = NewController(ctx, env.factory.Spire().V1alpha1().ClusterFederatedTrustDomains(), k8sfake.NewClientset(), nil, client,
		Options{Options: fedreconciler.Options{TrustDomain: spiffeid.RequireTrustDomainFromString(spiretest.DefaultTrustDomain)}, ResyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	env.recorder = record.NewFakeRecorder(1000)
	env.setOptions(func(*Options) {})
	for _, obj := range objs {
		env.set(obj)
	}
	return env
}

// setOptions changes the controller's options, and rebuilds its reconciler (with an empty
// cache) and its recorder to match.
func (env *testEnv) setOptions(change func(*Options)) {
	env.t.Helper()
	change(&env.c.opts)
	env.c.events.Recorder = env.recorder
	var err error
	if env.c.reconciler, err = env.c.newReconciler(); err != nil {
		env.t.Fatal(err)
	}
}

// set stores or replaces a resource in the informer's cache.
func (env *testEnv) set(obj *spirev1alpha1.ClusterFederatedTrustDomain) {
	env.t.Helper()
	if err := env.c.cftdIndexer.Update(obj); err != nil {
		env.t.Fatal(err)
	}
}

// remove deletes a resource from the informer's cache.
func (env *testEnv) remove(obj *spirev1alpha1.ClusterFederatedTrustDomain) {
	env.t.Helper()
	if err := env.c.cftdIndexer.Delete(obj); err != nil {
		env.t.Fatal(err)
	}
}

func (env *testEnv) sync(td string) {
	env.t.Helper()
	if err := env.c.syncTrustDomain(env.ctx, td); err != nil {
		env.t.Fatalf("syncTrustDomain(%s): %v", td, err)
	}
}

func (env *testEnv) fullResync() {
	env.t.Helper()
	if err := env.c.fullResync(env.ctx); err != nil {
		env.t.Fatalf("fullResync: %v", err)
	}
}

// rel returns SPIRE's relationship with a trust domain, or nil.
func (env *testEnv) rel(td string) *spiretypes.FederationRelationship {
	for _, r := range env.spire.Relationships() {
		if r.TrustDomain == td {
			return r
		}
	}
	return nil
}

func (env *testEnv) trustDomains() []string {
	var tds []string
	for _, r := range env.spire.Relationships() {
		tds = append(tds, r.TrustDomain)
	}
	return tds
}

// expectWrites checks the number of SPIRE write calls since the last check.
func (env *testEnv) expectWrites(want int) {
	env.t.Helper()
	if got := env.spire.WriteCalls(); got != want {
		env.t.Errorf("SPIRE write calls = %d, want %d", got, want)
	}
	env.spire.ResetCalls()
}

// events drains the recorded events ("Type Reason Message").
func (env *testEnv) events() []string {
	var out []string
	for {
		select {
		case e := <-env.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// expectEvent checks that one of the drained events starts with prefix and contains every
// substring.
func expectEvent(t *testing.T, events []string, prefix string, substrings ...string) {
	t.Helper()
	for _, e := range events {
		if !strings.HasPrefix(e, prefix) {
			continue
		}
		ok := true
		for _, s := range substrings {
			ok = ok && strings.Contains(e, s)
		}
		if ok {
			return
		}
	}
	t.Errorf("no event %q containing %q among %q", prefix, substrings, events)
}

func profileOf(r *spiretypes.FederationRelationship) string {
	switch p := r.GetBundleEndpointProfile().(type) {
	case *spiretypes.FederationRelationship_HttpsWeb:
		return "https_web"
	case *spiretypes.FederationRelationship_HttpsSpiffe:
		return "https_spiffe " + p.HttpsSpiffe.GetEndpointSpiffeId()
	}
	return ""
}

func firstCA(r *spiretypes.FederationRelationship) []byte {
	if as := r.GetTrustDomainBundle().GetX509Authorities(); len(as) > 0 {
		return as[0].Asn1
	}
	return nil
}

func TestSyncCreatesUpdatesEachFieldAndDeletes(t *testing.T) {
	env := newTestEnv(t)
	env.fullResync()
	env.spire.ResetCalls()

	obj := cftd("fed", time.Hour, webSpec("fed.org", "https://fed.org/bundle"))
	env.set(obj)
	env.sync("fed.org")
	r := env.rel("fed.org")
	if r.GetBundleEndpointUrl() != "https://fed.org/bundle" || profileOf(r) != "https_web" || r.GetTrustDomainBundle() != nil {
		t.Fatalf("created %v", r)
	}
	env.expectWrites(1)
	expectEvent(t, env.events(), "Normal RelationshipCreated", "fed.org")

	env.sync("fed.org")
	env.expectWrites(0)

	type (
		spec = spirev1alpha1.ClusterFederatedTrustDomainSpec
		rel  = spiretypes.FederationRelationship
	)
	type step struct {
		name   string
		mutate func(*spec)
		check  func(*rel) bool
	}
	ca1, ca2 := newCA(t, "fed.org"), newCA(t, "fed.org")
	steps := []step{
		{"URL", func(s *spec) { s.BundleEndpointURL = "https://fed.org:8443/v2" },
			func(r *rel) bool { return r.BundleEndpointUrl == "https://fed.org:8443/v2" }},
		{"profile type", func(s *spec) {
			s.BundleEndpointProfile = spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSSPIFFEProfileType, EndpointSPIFFEID: "spiffe://fed.org/spire/server"}
		}, func(r *rel) bool { return profileOf(r) == "https_spiffe spiffe://fed.org/spire/server" }},
		{"endpoint SPIFFE ID", func(s *spec) {
			s.BundleEndpointProfile.EndpointSPIFFEID = "spiffe://fed.org/other"
		}, func(r *rel) bool { return profileOf(r) == "https_spiffe spiffe://fed.org/other" }},
		{"bundle added", func(s *spec) {
			s.TrustDomainBundle = bundleDoc(t, "fed.org", []*x509.Certificate{ca1}, nil, time.Minute, 1)
		}, func(r *rel) bool { return bytes.Equal(firstCA(r), ca1.Raw) }},
		{"bundle replaced", func(s *spec) {
			s.TrustDomainBundle = bundleDoc(t, "fed.org", []*x509.Certificate{ca2}, nil, time.Minute, 2)
		}, func(r *rel) bool {
			return bytes.Equal(firstCA(r), ca2.Raw) && r.TrustDomainBundle.SequenceNumber == 2
		}},
		{"profile back to https_web", func(s *spec) {
			s.BundleEndpointProfile = spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSWebProfileType}
		}, func(r *rel) bool { return profileOf(r) == "https_web" }},
	}
	for _, step := range steps {
		obj = obj.DeepCopy()
		step.mutate(&obj.Spec)
		env.set(obj)
		env.sync("fed.org")
		if r := env.rel("fed.org"); !step.check(r) {
			t.Fatalf("%s: SPIRE holds %v", step.name, r)
		}
		env.expectWrites(1)
		expectEvent(t, env.events(), "Normal RelationshipUpdated", "fed.org")
		// Syncing again, by key or in full, finds nothing to do.
		env.sync("fed.org")
		env.fullResync()
		env.expectWrites(0)
	}

	// Dropping the bundle from the spec is no difference: SPIRE keeps the one it holds.
	obj = obj.DeepCopy()
	obj.Spec.TrustDomainBundle = ""
	env.set(obj)
	env.sync("fed.org")
	env.fullResync()
	env.expectWrites(0)
	if !bytes.Equal(firstCA(env.rel("fed.org")), ca2.Raw) {
		t.Errorf("bundle not kept: %v", env.rel("fed.org"))
	}

	env.remove(obj)
	env.sync("fed.org")
	if len(env.trustDomains()) != 0 {
		t.Errorf("SPIRE still holds %v", env.trustDomains())
	}
	env.expectWrites(1)
}

func TestFullResyncDiffsEverything(t *testing.T) {
	env := newTestEnv(t,
		cftd("b", time.Hour, webSpec("b.org", "https://b.org/new")),
		cftd("c", time.Hour, webSpec("c.org", "https://c.org/")),
	)
	env.spire.SetRelationships(
		&spiretypes.FederationRelationship{TrustDomain: "a.org", BundleEndpointUrl: "https://a.org/", BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{}},
		&spiretypes.FederationRelationship{TrustDomain: "b.org", BundleEndpointUrl: "https://b.org/old", BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{}},
	)
	env.fullResync()
	if got := strings.Join(env.trustDomains(), ","); got != "b.org,c.org" {
		t.Errorf("SPIRE holds %s, want b.org,c.org", got)
	}
	if got := env.rel("b.org").GetBundleEndpointUrl(); got != "https://b.org/new" {
		t.Errorf("b.org URL = %q", got)
	}
	env.expectWrites(3) // one create, one update, one delete call
	env.fullResync()
	env.expectWrites(0)
}

func TestOldestWins(t *testing.T) {
	old := cftd("old", time.Hour, webSpec("fed.org", "https://old.fed.org/"))
	young := cftd("young", time.Minute, webSpec("fed.org", "https://young.fed.org/"))
	env := newTestEnv(t, young, old)
	env.fullResync()
	if got := env.rel("fed.org").GetBundleEndpointUrl(); got != "https://old.fed.org/" {
		t.Errorf("URL = %q, want the oldest resource's", got)
	}
	expectEvent(t, env.events(), "Warning Conflict", `"old"`)

	// When the oldest goes, the next one takes over.
	env.remove(old)
	env.sync("fed.org")
	if got := env.rel("fed.org").GetBundleEndpointUrl(); got != "https://young.fed.org/" {
		t.Errorf("URL = %q after the oldest was deleted, want the younger resource's", got)
	}
}

func TestInvalidSpecLeavesRelationshipsAlone(t *testing.T) {
	existing := &spiretypes.FederationRelationship{TrustDomain: "fed.org", BundleEndpointUrl: "https://fed.org/",
		BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{}}
	broken := cftd("broken", time.Hour, webSpec("fed.org", "http://fed.org/"))
	env := newTestEnv(t,
		broken,
		cftd("new-broken", time.Hour, spiffeSpec("new.org", "https://new.org/", "", "")),
		cftd("own", time.Hour, webSpec(spiretest.DefaultTrustDomain, "https://own/")),
		cftd("as-id", time.Hour, webSpec("spiffe://id.org", "https://id.org/")),
		cftd("good", time.Hour, webSpec("good.org", "https://good.org/")),
	)
	env.spire.SetRelationships(existing,
		&spiretypes.FederationRelationship{TrustDomain: "id.org", BundleEndpointUrl: "https://id.org/", BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{}})
	env.fullResync()

	if got := strings.Join(env.trustDomains(), ","); got != "fed.org,good.org,id.org" {
		t.Errorf("SPIRE holds %s, want fed.org,good.org,id.org", got)
	}
	if got := env.rel("fed.org"); !proto.Equal(got, existing) {
		t.Errorf("fed.org = %v, want it untouched", got)
	}
	env.expectWrites(1) // good.org's create
	events := env.events()
	expectEvent(t, events, "Warning InvalidSpec", "spec.bundleEndpointURL", "https scheme")
	expectEvent(t, events, "Warning InvalidSpec", "spec.bundleEndpointProfile.endpointSPIFFEID")
	expectEvent(t, events, "Warning InvalidSpec", "spec.trustDomain", "own trust domain")
	expectEvent(t, events, "Warning InvalidSpec", "spec.trustDomain", "bare trust domain name")

	for _, td := range []string{"fed.org", "new.org", "id.org", spiretest.DefaultTrustDomain} {
		env.sync(td)
	}
	env.expectWrites(0)

	// Fixing the spec applies it.
	fixed := broken.DeepCopy()
	fixed.Spec.BundleEndpointURL = "https://fed.org/fixed"
	env.set(fixed)
	env.sync("fed.org")
	if got := env.rel("fed.org").GetBundleEndpointUrl(); got != "https://fed.org/fixed" {
		t.Errorf("URL = %q after the fix", got)
	}
}

func TestFailedListWritesNothing(t *testing.T) {
	env := newTestEnv(t, cftd("new", time.Hour, webSpec("new.org", "https://new.org/")))
	env.spire.SetRelationships(&spiretypes.FederationRelationship{TrustDomain: "undeclared.org", BundleEndpointUrl: "https://u/",
		BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{}})

	env.spire.FailNext(spiretest.MethodListFederationRelationships, 1, codes.Unavailable)
	if err := env.c.fullResync(env.ctx); err == nil {
		t.Fatal("fullResync succeeded while listing failed")
	}
	env.expectWrites(0)
	if got := strings.Join(env.trustDomains(), ","); got != "undeclared.org" {
		t.Errorf("SPIRE holds %s after a failed list", got)
	}

	// The initial resync retries until the list succeeds, and only then writes.
	env.spire.FailNext(spiretest.MethodListFederationRelationships, 2, codes.Unavailable)
	if !runner.UntilSucceeded(env.ctx, env.c.fullResync) {
		t.Fatal("the initial resync gave up")
	}
	// Two failed calls, then a list of one or more pages.
	if n := env.spire.Calls(spiretest.MethodListFederationRelationships); n < 3 {
		t.Errorf("list calls = %d, want at least 3", n)
	}
	if got := strings.Join(env.trustDomains(), ","); got != "new.org" {
		t.Errorf("SPIRE holds %s, want new.org", got)
	}
}

// TestStaleCache covers SPIRE v1.13 answering INTERNAL where ALREADY_EXISTS or NOT_FOUND is
// meant: the controller refreshes the trust domain, and the retry does the right write.
func TestStaleCache(t *testing.T) {
	t.Run("create of an existing relationship", func(t *testing.T) {
		env := newTestEnv(t)
		env.fullResync()
		// Created behind the controller's back, after its list.
		env.spire.SetRelationships(&spiretypes.FederationRelationship{TrustDomain: "fed.org", BundleEndpointUrl: "https://fed.org/old",
			BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{}})
		env.spire.ResetCalls()
		env.set(cftd("fed", time.Hour, webSpec("fed.org", "https://fed.org/new")))

		err := env.c.syncTrustDomain(env.ctx, "fed.org")
		if err == nil || !strings.Contains(err.Error(), "Internal") {
			t.Fatalf("first sync: err = %v, want SPIRE's INTERNAL", err)
		}
		if n := env.spire.Calls(spiretest.MethodListFederationRelationships); n == 0 {
			t.Error("the failed create did not refresh the cache")
		}
		env.spire.ResetCalls()
		env.sync("fed.org")
		if got := env.rel("fed.org").GetBundleEndpointUrl(); got != "https://fed.org/new" {
			t.Errorf("URL = %q after the retry", got)
		}
		if c, u := env.spire.Calls(spiretest.MethodBatchCreateFederationRelationship), env.spire.Calls(spiretest.MethodBatchUpdateFederationRelationship); c != 0 || u != 1 {
			t.Errorf("retry made %d creates and %d updates, want 0 and 1", c, u)
		}
	})

	t.Run("update of a missing relationship", func(t *testing.T) {
		obj := cftd("fed", time.Hour, webSpec("fed.org", "https://fed.org/old"))
		env := newTestEnv(t, obj)
		env.fullResync()
		env.spire.SetRelationships() // deleted behind the controller's back
		obj = obj.DeepCopy()
		obj.Spec.BundleEndpointURL = "https://fed.org/new"
		env.set(obj)

		if err := env.c.syncTrustDomain(env.ctx, "fed.org"); err == nil {
			t.Fatal("first sync succeeded; want SPIRE's INTERNAL for the missing relationship")
		}
		env.sync("fed.org")
		if got := env.rel("fed.org").GetBundleEndpointUrl(); got != "https://fed.org/new" {
			t.Errorf("URL = %q after the retry", got)
		}
	})

	t.Run("delete of a missing relationship", func(t *testing.T) {
		obj := cftd("fed", time.Hour, webSpec("fed.org", "https://fed.org/"))
		env := newTestEnv(t, obj)
		env.fullResync()
		env.spire.SetRelationships()
		env.remove(obj)
		env.spire.ResetCalls()
		env.sync("fed.org") // NOT_FOUND is success
		env.expectWrites(1)
		// The relationship is gone from the cache too: nothing is left to delete.
		env.sync("fed.org")
		env.expectWrites(0)
	})

	t.Run("failed write is retried without a refresh", func(t *testing.T) {
		env := newTestEnv(t, cftd("fed", time.Hour, webSpec("fed.org", "https://fed.org/")))
		env.fullResync()
		env.remove(cftd("fed", time.Hour, webSpec("fed.org", "https://fed.org/")))
		env.spire.ResetCalls()
		env.spire.FailNext(spiretest.MethodBatchDeleteFederationRelationship, 1, codes.Unavailable)
		if err := env.c.syncTrustDomain(env.ctx, "fed.org"); err == nil {
			t.Fatal("sync succeeded while SPIRE was unavailable")
		}
		if n := env.spire.Calls(spiretest.MethodListFederationRelationships); n != 0 {
			t.Errorf("list calls = %d, want 0", n)
		}
		env.sync("fed.org")
		if len(env.trustDomains()) != 0 {
			t.Errorf("SPIRE holds %v", env.trustDomains())
		}
	})
}

// drainQueue returns the keys in the controller's queue, in order, and empties it.
func drainQueue(c *Controller) []string {
	var keys []string
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		c.queue.Done(k)
		c.queue.Forget(k)
		keys = append(keys, k)
	}
	return keys
}

func TestAddAndDeleteEnqueueTheTrustDomain(t *testing.T) {
	env := newTestEnv(t)
	a := cftd("x", time.Hour, webSpec("a.org", "https://a/"))
	env.c.enqueue(a)
	env.c.onDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: webAsID(a)})
	env.c.onDelete(a)
	// A bad spelling keys as itself, so that its sync finds the resource and reports it.
	env.c.enqueue(cftd("bad", time.Hour, webSpec("not a trust domain", "https://b/")))
	if diff := cmp.Diff([]string{"a.org", "not a trust domain"}, drainQueue(env.c)); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

// TestOnClusterFederatedTrustDomainUpdate: which updates enqueue which trust domains.
func TestOnClusterFederatedTrustDomainUpdate(t *testing.T) {
	base := cftd("x", time.Hour, webSpec("a.org", "https://a/"))
	changed := func(mutate func(*spirev1alpha1.ClusterFederatedTrustDomain)) *spirev1alpha1.ClusterFederatedTrustDomain {
		out := base.DeepCopy()
		out.ResourceVersion = "2"
		mutate(out)
		return out
	}
	tests := []struct {
		name string
		new  *spirev1alpha1.ClusterFederatedTrustDomain
		want []string
	}{
		{name: "informer resync, same resource version: nothing", new: base.DeepCopy()},
		{name: "URL changed", new: changed(func(o *spirev1alpha1.ClusterFederatedTrustDomain) { o.Spec.BundleEndpointURL = "https://a/v2" }),
			want: []string{"a.org"}},
		{name: "bundle changed", new: changed(func(o *spirev1alpha1.ClusterFederatedTrustDomain) { o.Spec.TrustDomainBundle = "{}" }),
			want: []string{"a.org"}},
		{name: "class changed: the trust domain may change hands", new: changed(func(o *spirev1alpha1.ClusterFederatedTrustDomain) { o.Spec.ClassName = "other" }),
			want: []string{"a.org"}},
		{name: "being deleted", new: changed(func(o *spirev1alpha1.ClusterFederatedTrustDomain) {
			o.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}),
			want: []string{"a.org"}},
		{name: "status written, by this controller or another: checked again, at no SPIRE cost",
			new: changed(func(o *spirev1alpha1.ClusterFederatedTrustDomain) {
				o.Status.Conditions = []metav1.Condition{{Type: spirev1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
			}),
			want: []string{"a.org"}},
		{name: "renamed to another trust domain: the new one, then the one it gave up",
			new:  changed(func(o *spirev1alpha1.ClusterFederatedTrustDomain) { o.Spec.TrustDomain = "b.org" }),
			want: []string{"b.org", "a.org"}},
		{name: "respelled as a SPIFFE ID: the same trust domain, once",
			new:  changed(func(o *spirev1alpha1.ClusterFederatedTrustDomain) { o.Spec.TrustDomain = "spiffe://a.org" }),
			want: []string{"a.org"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.c.onUpdate(base, tt.new)
			if diff := cmp.Diff(tt.want, drainQueue(env.c)); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

// metricValue reads a counter's or gauge's value.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}

// webAsID returns a copy of obj naming its trust domain as a SPIFFE ID, which keys the same.
func webAsID(obj *spirev1alpha1.ClusterFederatedTrustDomain) *spirev1alpha1.ClusterFederatedTrustDomain {
	out := obj.DeepCopy()
	out.Spec.TrustDomain = "spiffe://" + obj.Spec.TrustDomain
	return out
}

// TestRun runs the controller with its informer and workers: it writes nothing until SPIRE
// answers a list, records its full resyncs in the metrics the entry controller records, then
// follows resources created, renamed and deleted through the API.
func TestRun(t *testing.T) {
	env := newTestEnv(t)
	success := metrics.FullResyncs.WithLabelValues(ControllerName, "success")
	failure := metrics.FullResyncs.WithLabelValues(ControllerName, "failure")
	successes, failures := metricValue(t, success), metricValue(t, failure)
	before := float64(time.Now().Unix())
	env.spire.SetRelationships(&spiretypes.FederationRelationship{TrustDomain: "undeclared.org", BundleEndpointUrl: "https://u/",
		BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{}})
	env.spire.FailNext(spiretest.MethodListFederationRelationships, 2, codes.Unavailable)
	ctx, cancel := context.WithCancel(env.ctx)
	env.factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		env.c.Run(ctx, 2)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
		env.factory.Shutdown()
	})

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v; SPIRE holds %v", what, err, env.trustDomains())
		}
	}
	holds := func(tds string) func() bool {
		return func() bool { return strings.Join(env.trustDomains(), ",") == tds }
	}
	waitFor("initial resync", env.c.HasSynced)
	waitFor("undeclared relationship deleted", holds(""))

	// Two failed lists, then one that succeeded; a successful resync sets the gauges.
	resyncs := map[string]float64{
		"success": metricValue(t, success) - successes,
		"failure": metricValue(t, failure) - failures,
	}
	if diff := cmp.Diff(map[string]float64{"success": 1, "failure": 2}, resyncs); diff != "" {
		t.Errorf("full resyncs counted (-want +got):\n%s", diff)
	}
	if at := metricValue(t, metrics.LastFullResyncTime.WithLabelValues(ControllerName)); at < before {
		t.Errorf("last full resync time = %v, want at least %v", at, before)
	}

	clients := env.api.SpireV1alpha1().ClusterFederatedTrustDomains()
	obj := cftd("fed", 0, webSpec("a.org", "https://a.org/"))
	if _, err := clients.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a.org created", holds("a.org"))

	obj.Spec.TrustDomain = "b.org"
	obj.ResourceVersion = ""
	if _, err := clients.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a.org renamed to b.org", holds("b.org"))

	if err := clients.Delete(ctx, obj.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("b.org deleted", holds(""))
}

// TestClassName: a controller handles the resources of its class, and classless ones only
// when its class is empty or it watches classless resources, as spire-controller-manager
// does. With no class set, another install's resources are not its own.
func TestClassName(t *testing.T) {
	objs := func() []*spirev1alpha1.ClusterFederatedTrustDomain {
		classless := cftd("classless", time.Hour, webSpec("classless.org", "https://classless/"))
		mine := cftd("mine", time.Hour, webSpec("mine.org", "https://mine/"))
		mine.Spec.ClassName = "mine"
		other := cftd("other", time.Hour, webSpec("other.org", "https://other/"))
		other.Spec.ClassName = "other"
		return []*spirev1alpha1.ClusterFederatedTrustDomain{classless, mine, other}
	}
	tests := []struct {
		name           string
		className      string
		watchClassless bool
		want           []string
	}{
		{name: "no class: classless only", want: []string{"classless.org"}},
		{name: "no class, watchClassless: classless only", watchClassless: true, want: []string{"classless.org"}},
		{name: "a class: that class only", className: "mine", want: []string{"mine.org"}},
		{name: "a class and watchClassless: that class and classless", className: "mine", watchClassless: true, want: []string{"classless.org", "mine.org"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t, objs()...)
			env.setOptions(func(o *Options) { o.Class.Name, o.Class.WatchClassless = tt.className, tt.watchClassless })
			env.fullResync()
			for _, td := range []string{"classless.org", "mine.org", "other.org"} {
				env.sync(td)
			}
			got := env.trustDomains()
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SPIRE relationships (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMaxResyncShareStretchesTheInterval: the controller rests after a full resync as
// --max-resync-share says. With a share so small that any resync's rest outlasts the test,
// the initial resync and the first periodic one are the only lists of SPIRE, where the
// default share would list again every millisecond.
func TestMaxResyncShareStretchesTheInterval(t *testing.T) {
	env := newTestEnv(t)
	env.c.opts.ResyncInterval = time.Millisecond
	env.c.opts.MaxResyncShare = 1e-9
	ctx, cancel := context.WithCancel(env.ctx)
	env.factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		env.c.Run(ctx, 1)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		env.factory.Shutdown()
	})
	lists := func() int { return env.spire.Calls(spiretest.MethodListFederationRelationships) }
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return lists() >= 2, nil
	}); err != nil {
		t.Fatalf("waiting for the initial and the first periodic resync: %v (%d lists)", err, lists())
	}
	// Any further list would come within a millisecond or two if the share were not honoured.
	time.Sleep(200 * time.Millisecond)
	if n := lists(); n != 2 {
		t.Errorf("SPIRE was listed %d times, want 2: the rest after a resync ignores MaxResyncShare", n)
	}
}
