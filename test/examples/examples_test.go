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

package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2/ktesting"
	sigsyaml "sigs.k8s.io/yaml"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	kindConfig          = config.Kind
	kindClusterSPIFFEID = "ClusterSPIFFEID"
	kindCSE             = "ClusterStaticEntry"
	kindCFTD            = "ClusterFederatedTrustDomain"

	// configFile is the example config the controllers run with.
	configFile = "config.yaml"

	// gcInterval replaces the example's full resync interval, so that the test sees several
	// full resyncs leave the examples' entries and relationships alone.
	gcInterval = 2 * time.Second
	// convergeTimeout bounds how long the controllers may take to reconcile every example.
	convergeTimeout = 60 * time.Second
)

// document is one YAML document of an example file.
type document struct {
	file  string // base name, e.g. clusterspiffeid.yaml
	index int    // 1-based position of the document in its file
	yaml  []byte
	obj   *unstructured.Unstructured

	// live is the object as the kube-apiserver stored it, once applied, and resource is
	// where it is served.
	live     *unstructured.Unstructured
	resource dynamic.ResourceInterface
}

func (d *document) String() string {
	return fmt.Sprintf("%s, document %d (%s %q)", d.file, d.index, d.obj.GetKind(), d.obj.GetName())
}

// readExamples decodes every YAML document of manifests/examples/*.yaml, in file order.
// Documents holding only comments are skipped; any other document must be an object with an
// apiVersion and a kind.
func readExamples(t *testing.T) []*document {
	t.Helper()
	root, err := realcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "manifests", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no manifests/examples/*.yaml under %s", root)
	}
	var docs []*document
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for index := 1; ; index++ {
			raw, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: reading document %d: %v", filepath.Base(path), index, err)
			}
			js, err := sigsyaml.YAMLToJSON(raw)
			if err != nil {
				t.Fatalf("%s: document %d is not valid YAML: %v", filepath.Base(path), index, err)
			}
			if s := string(bytes.TrimSpace(js)); s == "null" || s == "" {
				continue
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s: document %d is not an object with apiVersion and kind: %v", filepath.Base(path), index, err)
			}
			docs = append(docs, &document{file: filepath.Base(path), index: index, yaml: raw, obj: obj})
		}
	}
	return docs
}

// requireKinds fails unless the examples hold at least one document of each kind, so that an
// example that goes missing fails the test instead of shrinking it.
func requireKinds(t *testing.T, docs []*document, kinds ...string) {
	t.Helper()
	for _, kind := range kinds {
		if !slices.ContainsFunc(docs, func(d *document) bool { return d.obj.GetKind() == kind }) {
			t.Errorf("manifests/examples has no %s", kind)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// decodeStrict decodes a document into a typed object, refusing fields the type does not have.
func decodeStrict[T any](t *testing.T, d *document) *T {
	t.Helper()
	var v T
	if err := sigsyaml.UnmarshalStrict(d.yaml, &v); err != nil {
		t.Fatalf("%s: %v", d, err)
	}
	return &v
}

// TestExamplesDecode checks, without any server, what can be checked offline: every document
// decodes, config files are accepted, our kinds have no unknown fields and every
// trustDomainBundle is a SPIFFE bundle of its trust domain.
func TestExamplesDecode(t *testing.T) {
	docs := readExamples(t)
	requireKinds(t, docs, kindConfig, kindClusterSPIFFEID, kindCSE, kindCFTD)
	for _, d := range docs {
		switch d.obj.GetKind() {
		case kindConfig:
			if _, err := config.Parse(d.yaml); err != nil {
				t.Errorf("%s: config.Parse refused it: %v", d, err)
			}
		case kindClusterSPIFFEID:
			decodeStrict[spirev1alpha1.ClusterSPIFFEID](t, d)
		case kindCSE:
			decodeStrict[spirev1alpha1.ClusterStaticEntry](t, d)
		case kindCFTD:
			cftd := decodeStrict[spirev1alpha1.ClusterFederatedTrustDomain](t, d)
			if cftd.Spec.TrustDomainBundle == "" {
				continue
			}
			td, err := spiffeid.TrustDomainFromString(cftd.Spec.TrustDomain)
			if err != nil {
				t.Errorf("%s: trustDomain: %v", d, err)
				continue
			}
			if _, err := spiffebundle.Parse(td, []byte(cftd.Spec.TrustDomainBundle)); err != nil {
				t.Errorf("%s: trustDomainBundle: %v", d, err)
			}
		}
	}
}

// TestExamplesReconcile applies every example to a real kube-apiserver, runs the controllers
// with the example config against a real spire-server, and checks with the real spire-server
// CLI that SPIRE holds what each example declares.
func TestExamplesReconcile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real etcd, kube-apiserver and spire-server; skipped with -short")
	}
	begin := time.Now()
	docs := readExamples(t)
	requireKinds(t, docs, kindConfig, kindClusterSPIFFEID, kindCSE, kindCFTD)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Config files must be accepted; config.yaml's is the one the controllers run with.
	var cfg *config.Config
	var objects []*document
	for _, d := range docs {
		if d.obj.GetKind() != kindConfig {
			objects = append(objects, d)
			continue
		}
		c, err := config.Parse(d.yaml)
		if err != nil {
			t.Errorf("%s: config.Parse refused it: %v", d, err)
			continue
		}
		if d.file == configFile {
			if cfg != nil {
				t.Fatalf("%s: a second config in %s", d, configFile)
			}
			cfg = c
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if cfg == nil {
		t.Fatalf("manifests/examples/%s holds no %s", configFile, kindConfig)
	}

	kube := realcluster.NewKube(t, realcluster.KubeOptions{})
	spireServer := realcluster.NewSPIRE(t, realcluster.SPIREOptions{TrustDomain: cfg.TrustDomain.Name()})
	crdDir, err := realcluster.CRDsDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.ApplyCRDs(ctx, kube.RESTConfig(), crdDir); err != nil {
		t.Fatal(err)
	}
	kubeClient, err := kubernetes.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	spireAPI, err := spireclientset.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("real kube-apiserver and spire-server up after %s", time.Since(begin).Round(time.Millisecond))

	applyAll(ctx, t, dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubeClient.Discovery())), objects)

	// ClusterSPIFFEID and ClusterStaticEntry have conditions; any other kind is checked too once
	// its CRD declares them.
	withConditions := kindsWithConditions(ctx, t, dyn)
	for _, kind := range []string{kindClusterSPIFFEID, kindCSE} {
		if gk := (schema.GroupKind{Group: spirev1alpha1.SchemeGroupVersion.Group, Kind: kind}); !withConditions[gk] {
			t.Fatalf("the CRD of %s declares no status.conditions", kind)
		}
	}
	for gk := range withConditions {
		t.Logf("%s has conditions: every example of it must become Ready", gk)
	}

	// What SPIRE must hold: written out below, with the UIDs the kube-apiserver gave the
	// examples' pods and nodes filled in.
	wantEntries := expectedEntries(t, liveUIDs(t, objects))
	wantRels := expectedRelationships()
	for _, w := range wantEntries {
		t.Logf("expect entry %s", w)
	}
	for _, w := range wantRels {
		t.Logf("expect federation relationship %s", w)
	}

	// The example config, pointed at the test's SPIRE server and resyncing often.
	cfg.SPIREServerSocketPath = spireServer.SocketPath()
	cfg.GCInterval = gcInterval
	client, err := spire.Dial(ctx, cfg.SPIREServerSocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	// The controllers run as the binary runs them.
	kubeInformers, spireInformers := app.NewInformerFactories(kubeClient, spireAPI)
	started := time.Now()
	runErr := make(chan error, 1)
	go func() {
		runErr <- app.Run(ctx, app.ControllerContext{
			Config: cfg, KubeClient: kubeClient, SpireAPIClient: spireAPI,
			KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: client,
		}, 4, nil)
	}()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("app.Run: %v", err)
		}
	}()

	c := &checker{t: t, ctx: ctx, spire: spireServer, spireAPI: spireAPI, objects: objects,
		withConditions: withConditions, wantEntries: wantEntries, wantRels: wantRels}
	eventually(ctx, t, "every example reconciled into SPIRE", convergeTimeout, c.all)
	t.Logf("every example reconciled %s after the controllers started", time.Since(started).Round(time.Millisecond))

	// Several full resyncs later nothing has changed: no entry was rewritten or replaced.
	before := c.snapshot()
	sleep(ctx, 3*gcInterval+gcInterval/2)
	if err := c.all(); err != nil {
		t.Errorf("after %d full resyncs: %v", 3, err)
	}
	if after := c.snapshot(); !slices.Equal(before, after) {
		t.Errorf("full resyncs changed SPIRE's state:\nbefore: %v\nafter:  %v", before, after)
	}
	logWarnings(ctx, t, kubeClient)
}

// applyOrder puts namespaces first and other cluster-scoped objects before namespaced ones, so
// that every object's namespace exists when it is created.
func applyOrder(d *document) int {
	switch {
	case d.obj.GetKind() == "Namespace" && d.obj.GetAPIVersion() == "v1":
		return 0
	case d.obj.GetNamespace() == "":
		return 1
	default:
		return 2
	}
}

// applyAll creates every object on the real kube-apiserver, with strict field validation so
// that a misspelt field fails instead of being dropped.
func applyAll(ctx context.Context, t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, objects []*document) {
	t.Helper()
	ordered := slices.Clone(objects)
	slices.SortStableFunc(ordered, func(a, b *document) int { return applyOrder(a) - applyOrder(b) })
	for _, d := range ordered {
		gvk := d.obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: the kube-apiserver does not serve %s: %v", d, gvk, err)
		}
		var resource dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := d.obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			resource = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		live, err := resource.Create(ctx, d.obj.DeepCopy(), metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			t.Fatalf("%s: the kube-apiserver refused it: %v", d, err)
		}
		// Strict validation refuses unknown fields, but a field behind a disabled feature gate
		// is known and silently dropped: every declared field must be stored as declared.
		if lost := notKept("", d.obj.Object, live.Object); len(lost) > 0 {
			t.Errorf("%s: the kube-apiserver did not store %s as declared", d, strings.Join(lost, ", "))
		}
		d.live, d.resource = live, resource
	}
}

// notKept returns the paths of the fields of want that got lacks or holds with another value;
// fields only got has (defaults, metadata the server sets) do not count.
func notKept(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			out = append(out, notKept(path+"."+k, v, g[k])...)
		}
		slices.Sort(out)
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, notKept(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if want != got {
			return []string{path}
		}
		return nil
	}
}

// entry is an entry in a form that compares with ==-like semantics: selectors and
// federatesWith sorted (SPIRE keeps them as sets), DNS names in order (the first is the
// SVID's common name).
type entry struct {
	SPIFFEID      string
	ParentID      string
	Selectors     []string
	FederatesWith []string
	DNSNames      []string
	X509SVIDTTL   int32
	JWTSVIDTTL    int32
	Hint          string
	Admin         bool
	Downstream    bool
	StoreSVID     bool
}

// key identifies an entry as SPIRE does: SPIFFE ID, parent ID and selectors.
func (e entry) key() string {
	return e.SPIFFEID + " " + e.ParentID + " " + strings.Join(e.Selectors, ",")
}

func (e entry) String() string {
	type fields entry // without the String method
	return fmt.Sprintf("%+v", fields(e))
}

// wantEntry is an entry an example declares.
type wantEntry struct {
	entry
	from string
}

func (w wantEntry) String() string { return w.entry.String() + " from " + w.from }

func sorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// inOrder keeps the first of repeated strings.
func inOrder(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func fromCLI(e realcluster.Entry) entry {
	var selectors []string
	for _, s := range e.Selectors {
		selectors = append(selectors, s.String())
	}
	return entry{
		SPIFFEID: e.SPIFFEID, ParentID: e.ParentID, Selectors: sorted(selectors),
		FederatesWith: sorted(e.FederatesWith), DNSNames: inOrder(e.DNSNames),
		X509SVIDTTL: e.X509SVIDTTL, JWTSVIDTTL: e.JWTSVIDTTL, Hint: e.Hint,
		Admin: e.Admin, Downstream: e.Downstream, StoreSVID: e.StoreSVID,
	}
}

// uids maps "Kind namespace/name" of each example object to the UID the kube-apiserver gave it.
type uids map[string]string

func liveUIDs(t *testing.T, objects []*document) uids {
	t.Helper()
	out := uids{}
	for _, d := range objects {
		if d.live == nil {
			t.Fatalf("%s was not applied", d)
		}
		out[d.obj.GetKind()+" "+d.live.GetNamespace()+"/"+d.live.GetName()] = string(d.live.GetUID())
	}
	return out
}

// of returns the UID of an example object, failing the test if the examples lack it.
func (u uids) of(t *testing.T, kind, namespace, name string) string {
	t.Helper()
	uid, ok := u[kind+" "+namespace+"/"+name]
	if !ok {
		t.Fatalf("no %s %s/%s among the examples", kind, namespace, name)
	}
	return uid
}

// expectedEntries is every entry SPIRE must hold once the controllers ran with
// manifests/examples/config.yaml (trust domain example.org, cluster production-east, cluster
// domain cluster.local, every class accepted) on the examples, written out by hand from their
// comments: a change to an example must change this list too. Only the UIDs the
// kube-apiserver assigns are looked up.
func expectedEntries(t *testing.T, uid uids) []wantEntry {
	t.Helper()
	// clusterspiffeid.yaml selects the three pods of local-demo-workloads.yaml (app=web in the
	// namespace demo, labelled env=demo). Each gets the SPIFFE ID of its service account, the
	// k8s_psat agent of its node as parent, the pod's UID and the two templated selectors, the
	// Service's DNS name and the 1h X.509-SVID TTL.
	podEntry := func(pod, node string) wantEntry {
		return wantEntry{from: "ClusterSPIFFEID demo-web, pod demo/" + pod, entry: entry{
			SPIFFEID: "spiffe://example.org/ns/demo/sa/default",
			ParentID: "spiffe://example.org/spire/agent/k8s_psat/production-east/" + uid.of(t, "Node", "", node),
			Selectors: []string{
				"k8s:ns:demo",
				"k8s:pod-uid:" + uid.of(t, "Pod", "demo", pod),
				"k8s:sa:default",
			},
			DNSNames:    []string{"web.demo.svc.cluster.local"},
			X509SVIDTTL: 3600,
		}}
	}
	// pod-certificates.yaml's ClusterSPIFFEID selects no pod here: no controller-manager runs to
	// create its Deployment's pods, so it declares no entry (and its stats count none).
	return []wantEntry{
		podEntry("web-1", "node-a"),
		podEntry("web-2", "node-b"),
		podEntry("web-3", "node-a"),
		// clusterstaticentry.yaml: each ClusterStaticEntry is its entry, as written.
		{from: "ClusterStaticEntry production-east-nodes", entry: entry{
			SPIFFEID:  "spiffe://example.org/k8s-node/production-east",
			ParentID:  "spiffe://example.org/spire/server",
			Selectors: []string{"k8s_psat:cluster:production-east"},
		}},
		{from: "ClusterStaticEntry billing-batch-vm", entry: entry{
			SPIFFEID:      "spiffe://example.org/vm/billing/batch",
			ParentID:      "spiffe://example.org/spire/agent/x509pop/3b4d0f2e8a61c97d5e02b1f64a8c3e9d7f105a26",
			Selectors:     []string{"unix:path:/opt/billing/bin/batch", "unix:user:billing"},
			FederatesWith: []string{"backend.example.net"},
			DNSNames:      []string{"batch.billing.vm.example.org"},
			X509SVIDTTL:   4 * 3600,
			JWTSVIDTTL:    5 * 60,
			Hint:          "billing-batch",
		}},
	}
}

// backendX509Authority is the root CA certificate (DER, base64) in the x5c of
// clusterfederatedtrustdomain.yaml's trustDomainBundle; backendJWTAuthority is its JWT
// signing key as compared here: "<key ID>=<PKIX DER of the JWK's public key, base64>".
const (
	backendX509Authority = "MIICCDCCAa2gAwIBAgIIN9IG9yMK5iowCgYIKoZIzj0EAwIwUzELMAkGA1UEBhMCVVMxGDAWBgNVBAoTD0JhY2tlbmQgRXhhbXBsZTEqMCgGA1UEAxMhYmFja2VuZC5leGFtcGxlLm5ldCBTUElSRSByb290IENBMB4XDTI2MDEwMTAwMDAwMFoXDTM2MDEwMTAwMDAwMFowUzELMAkGA1UEBhMCVVMxGDAWBgNVBAoTD0JhY2tlbmQgRXhhbXBsZTEqMCgGA1UEAxMhYmFja2VuZC5leGFtcGxlLm5ldCBTUElSRSByb290IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEXThycxFaFbYQ+WrjfU7eoVCB+FxgX8nHq7KRas5fjHfFVVn+W0mSoVKivvIVC5hOYww4UftSM/sZuDWVrJD/8KNrMGkwDgYDVR0PAQH/BAQDAgGGMA8GA1UdEwEB/wQFMAMBAf8wHQYDVR0OBBYEFPhrNjGFwsTsdBkaagS7qNq1mvtNMCcGA1UdEQQgMB6GHHNwaWZmZTovL2JhY2tlbmQuZXhhbXBsZS5uZXQwCgYIKoZIzj0EAwIDSQAwRgIhAPAYnLsMS/Hv4WWAvkOlBztS391Gr3pXpzwVbDmoHAdTAiEAh3zQzFt/CVfqiro5neIdRl3fuq3zlBAvEwnk4ZCWe8U="
	backendJWTAuthority  = "Xk7mQ2vN9pR4sT1wY6zB3cD8fG5hJ0aL=MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE19tWSfQeRfxBpV1RMaZjaRseOhQEIeDaDgYglOXflP6xWl7kjVQrzzGb6mM0azyDW9omSjxFHWRe3tw7B7yi0g=="
)

// expectedRelationships is every federation relationship SPIRE must hold for
// clusterfederatedtrustdomain.yaml, written out by hand.
func expectedRelationships() []relationship {
	return []relationship{
		{from: "ClusterFederatedTrustDomain payments-example-com",
			TrustDomain: "payments.example.com", BundleEndpointURL: "https://spiffe-bundle.payments.example.com/bundle", Profile: "https_web"},
		{from: "ClusterFederatedTrustDomain backend-example-net",
			TrustDomain: "backend.example.net", BundleEndpointURL: "https://spire-server.backend.example.net:8443", Profile: "https_spiffe",
			EndpointSPIFFEID: "spiffe://backend.example.net/spire/server",
			Bundle: &bundle{
				X509Authorities: []string{backendX509Authority},
				JWTAuthorities:  []string{backendJWTAuthority},
				RefreshHint:     300,
				SequenceNumber:  12,
			}},
	}
}

// relationship is a federation relationship as compared here; Bundle is nil when none is
// declared (SPIRE may then hold one it fetched, or none).
type relationship struct {
	TrustDomain       string
	BundleEndpointURL string
	Profile           string
	EndpointSPIFFEID  string
	Bundle            *bundle
	from              string
}

func (r relationship) String() string {
	return fmt.Sprintf("%s at %s (%s %s) bundle %v from %s", r.TrustDomain, r.BundleEndpointURL, r.Profile, r.EndpointSPIFFEID, r.Bundle, r.from)
}

// bundle is a trust domain bundle's content, in a comparable form.
type bundle struct {
	X509Authorities []string // base64 DER, sorted
	JWTAuthorities  []string // "key ID=base64 PKIX DER", sorted
	RefreshHint     int64    // seconds
	SequenceNumber  uint64
}

func (b *bundle) String() string {
	if b == nil {
		return "<none declared>"
	}
	return fmt.Sprintf("{%d X.509 authorities, JWT authorities %v, refresh hint %ds, sequence %d}",
		len(b.X509Authorities), b.JWTAuthorities, b.RefreshHint, b.SequenceNumber)
}

// cliBundle decodes a bundle as `spire-server federation list -output json` prints it: the
// protojson of SPIRE's types.Bundle, with bytes in base64 and 64-bit integers as strings.
func cliBundle(raw json.RawMessage) (*bundle, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var b struct {
		X509Authorities []struct {
			ASN1 string `json:"asn1"`
		} `json:"x509_authorities"`
		JWTAuthorities []struct {
			KeyID     string `json:"key_id"`
			PublicKey string `json:"public_key"`
		} `json:"jwt_authorities"`
		RefreshHint    json.Number `json:"refresh_hint"`
		SequenceNumber json.Number `json:"sequence_number"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("decoding bundle %s: %w", raw, err)
	}
	out := &bundle{}
	for _, a := range b.X509Authorities {
		out.X509Authorities = append(out.X509Authorities, a.ASN1)
	}
	for _, a := range b.JWTAuthorities {
		out.JWTAuthorities = append(out.JWTAuthorities, a.KeyID+"="+a.PublicKey)
	}
	slices.Sort(out.X509Authorities)
	slices.Sort(out.JWTAuthorities)
	var err error
	if b.RefreshHint != "" {
		if out.RefreshHint, err = b.RefreshHint.Int64(); err != nil {
			return nil, fmt.Errorf("refresh_hint %q: %w", b.RefreshHint, err)
		}
	}
	if b.SequenceNumber != "" {
		seq, err := b.SequenceNumber.Int64()
		if err != nil {
			return nil, fmt.Errorf("sequence_number %q: %w", b.SequenceNumber, err)
		}
		out.SequenceNumber = uint64(seq)
	}
	return out, nil
}

// checker compares SPIRE's state, read with the real CLI, and our resources' status with what
// the examples declare.
type checker struct {
	t              *testing.T
	ctx            context.Context
	spire          *realcluster.SPIRE
	spireAPI       spireclientset.Interface
	objects        []*document
	withConditions map[schema.GroupKind]bool
	wantEntries    []wantEntry
	wantRels       []relationship
}

// all returns every difference, or nil.
func (c *checker) all() error {
	return errors.Join(c.entries(), c.relationships(), c.conditions())
}

// entries checks that SPIRE holds exactly the declared entries, field for field.
func (c *checker) entries() error {
	shown, err := c.spire.EntryShow(c.ctx)
	if err != nil {
		return err
	}
	got := map[string]entry{}
	for _, e := range shown {
		got[fromCLI(e).key()] = fromCLI(e)
	}
	var errs []error
	for _, w := range c.wantEntries {
		g, ok := got[w.key()]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("SPIRE has no entry %s", w))
		case cmp.Diff(w.entry, g) != "":
			errs = append(errs, fmt.Errorf("SPIRE holds a different entry %s (-want +got):\n%s", w.from, cmp.Diff(w.entry, g)))
		}
		delete(got, w.key())
	}
	for _, g := range got {
		errs = append(errs, fmt.Errorf("SPIRE holds an entry no example declares: %s", g))
	}
	return errors.Join(errs...)
}

// relationships checks that SPIRE holds exactly the declared federation relationships.
func (c *checker) relationships() error {
	shown, err := c.spire.FederationShow(c.ctx)
	if err != nil {
		return err
	}
	got := map[string]realcluster.FederationRelationship{}
	for _, r := range shown {
		got[r.TrustDomain] = r
	}
	var errs []error
	for _, w := range c.wantRels {
		g, ok := got[w.TrustDomain]
		delete(got, w.TrustDomain)
		if !ok {
			errs = append(errs, fmt.Errorf("SPIRE has no federation relationship %s", w))
			continue
		}
		if g.BundleEndpointURL != w.BundleEndpointURL || g.Profile != w.Profile || g.EndpointSPIFFEID != w.EndpointSPIFFEID {
			errs = append(errs, fmt.Errorf("SPIRE holds federation relationship %+v, want %s", g, w))
			continue
		}
		if w.Bundle == nil {
			continue
		}
		b, err := cliBundle(g.TrustDomainBundle)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", w.TrustDomain, err))
		case b == nil:
			errs = append(errs, fmt.Errorf("SPIRE holds no bundle for %s, want %s", w.TrustDomain, w.Bundle))
		case cmp.Diff(w.Bundle, b) != "":
			errs = append(errs, fmt.Errorf("SPIRE holds a different bundle for %s (-want +got):\n%s", w.TrustDomain, cmp.Diff(w.Bundle, b)))
		}
	}
	for td := range got {
		errs = append(errs, fmt.Errorf("SPIRE holds a federation relationship no example declares: %+v", got[td]))
	}
	return errors.Join(errs...)
}

// conditions checks that every example resource whose kind has conditions (its CRD declares
// status.conditions) reports Ready=True for its current generation, that each
// ClusterSPIFFEID's stats count the pods selected and entries set without failures, and that
// each ClusterStaticEntry's status says its entry is set.
func (c *checker) conditions() error {
	var errs []error
	for _, d := range c.objects {
		if !c.withConditions[d.obj.GroupVersionKind().GroupKind()] {
			continue
		}
		live, err := d.resource.Get(c.ctx, d.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var obj struct {
			metav1.ObjectMeta `json:"metadata"`
			Status            struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, &obj); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d, err))
			continue
		}
		r := meta.FindStatusCondition(obj.Status.Conditions, "Ready")
		switch {
		case r == nil:
			errs = append(errs, fmt.Errorf("%s has no Ready condition", d))
		case r.Status != metav1.ConditionTrue || r.ObservedGeneration != obj.Generation:
			errs = append(errs, fmt.Errorf("%s: Ready=%s (%s: %s) for generation %d, want True for generation %d",
				d, r.Status, r.Reason, r.Message, r.ObservedGeneration, obj.Generation))
		}
	}
	for _, d := range c.objects {
		switch d.obj.GetKind() {
		case kindClusterSPIFFEID:
			clusterSPIFFEID, err := c.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(c.ctx, d.obj.GetName(), metav1.GetOptions{})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			n := 0
			for _, w := range c.wantEntries {
				if strings.HasPrefix(w.from, kindClusterSPIFFEID+" "+d.obj.GetName()+", pod ") {
					n++
				}
			}
			if want := (spirev1alpha1.ClusterSPIFFEIDStats{
				NamespacesSelected: clusterSPIFFEID.Status.Stats.NamespacesSelected, NamespacesIgnored: clusterSPIFFEID.Status.Stats.NamespacesIgnored,
				PodsSelected: n, EntriesToSet: n,
			}); clusterSPIFFEID.Status.Stats != want {
				errs = append(errs, fmt.Errorf("%s: stats %+v, want %+v", d, clusterSPIFFEID.Status.Stats, want))
			}
		case kindCSE:
			cse, err := c.spireAPI.SpireV1alpha1().ClusterStaticEntries().Get(c.ctx, d.obj.GetName(), metav1.GetOptions{})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if s := cse.Status; !s.Rendered || s.Masked || !s.Set {
				errs = append(errs, fmt.Errorf("%s: status rendered=%t masked=%t set=%t, want rendered and set", d, s.Rendered, s.Masked, s.Set))
			}
		}
	}
	return errors.Join(errs...)
}

// kindsWithConditions returns the kinds whose CustomResourceDefinition, as served, declares
// status.conditions in some version.
func kindsWithConditions(ctx context.Context, t *testing.T, dyn dynamic.Interface) map[schema.GroupKind]bool {
	t.Helper()
	crds, err := dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[schema.GroupKind]bool{}
	for _, item := range crds.Items {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			if _, ok := v.Schema.OpenAPIV3Schema.Properties["status"].Properties["conditions"]; ok {
				out[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = true
			}
		}
	}
	return out
}

// snapshot lists SPIRE's entries with their IDs and revision numbers, and its relationships,
// so that a rewrite or a delete-and-recreate shows.
func (c *checker) snapshot() []string {
	c.t.Helper()
	entries, err := c.spire.EntryShow(c.ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	rels, err := c.spire.FederationShow(c.ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("entry %s %s revision %d", e.ID, e.SPIFFEID, e.RevisionNumber))
	}
	for _, r := range rels {
		out = append(out, fmt.Sprintf("relationship %s %s %s bundle %s", r.TrustDomain, r.BundleEndpointURL, r.Profile, r.TrustDomainBundle))
	}
	slices.Sort(out)
	return out
}

// eventually polls cond until it returns nil, failing the test with its last error on timeout.
func eventually(ctx context.Context, t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s:\n%v", what, last)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// logWarnings logs the Warning Events the controllers recorded, to explain a failure and show
// what transient trouble a correct run went through.
func logWarnings(ctx context.Context, t *testing.T, kubeClient kubernetes.Interface) {
	t.Helper()
	events, err := kubeClient.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing events: %v", err)
		return
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			t.Logf("Warning event on %s %s: %s (x%d): %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Count, e.Message)
		}
	}
}
