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
	"crypto"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// countingClient records the controller's writes and the per-item codes SPIRE answered.
type countingClient struct {
	spire.FederationClient

	mu     sync.Mutex
	writes int
	codes  []string // "op td code" of failed items
}

func (c *countingClient) record(op string, tds []string, errs []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	for i, err := range errs {
		if err != nil {
			c.codes = append(c.codes, fmt.Sprintf("%s %s %s", op, tds[i], status.Code(err)))
		}
	}
}

func (c *countingClient) CreateFederationRelationships(ctx context.Context, rels []*spiretypes.FederationRelationship) ([]spire.FederationResult, error) {
	res, err := c.FederationClient.CreateFederationRelationships(ctx, rels)
	tds, errs := make([]string, len(res)), make([]error, len(res))
	for i, r := range res {
		tds[i], errs[i] = rels[i].TrustDomain, r.Err
	}
	c.record("create", tds, errs)
	return res, err
}

func (c *countingClient) UpdateFederationRelationships(ctx context.Context, rels []*spiretypes.FederationRelationship, mask *spiretypes.FederationRelationshipMask) ([]spire.FederationResult, error) {
	res, err := c.FederationClient.UpdateFederationRelationships(ctx, rels, mask)
	tds, errs := make([]string, len(res)), make([]error, len(res))
	for i, r := range res {
		tds[i], errs[i] = rels[i].TrustDomain, r.Err
	}
	c.record("update", tds, errs)
	return res, err
}

func (c *countingClient) DeleteFederationRelationships(ctx context.Context, trustDomains []string) ([]spire.DeleteResult, error) {
	res, err := c.FederationClient.DeleteFederationRelationships(ctx, trustDomains)
	errs := make([]error, len(res))
	for i, r := range res {
		errs[i] = r.Err
	}
	c.record("delete", trustDomains[:len(res)], errs)
	return res, err
}

// take returns and resets what was recorded.
func (c *countingClient) take() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, cs := c.writes, c.codes
	c.writes, c.codes = 0, nil
	return w, cs
}

// cliBundle is a trust domain bundle as `spire-server federation list -output json` prints it.
type cliBundle struct {
	TrustDomain     string             `json:"trust_domain"`
	X509Authorities []cliX509Authority `json:"x509_authorities"`
	JWTAuthorities  []cliJWTAuthority  `json:"jwt_authorities"`
	RefreshHint     json.Number        `json:"refresh_hint"`
	SequenceNumber  json.Number        `json:"sequence_number"`
}

// cliX509Authority is one X.509 authority of a cliBundle.
type cliX509Authority struct {
	ASN1 []byte `json:"asn1"`
}

// cliJWTAuthority is one JWT authority of a cliBundle.
type cliJWTAuthority struct {
	KeyID     string `json:"key_id"`
	PublicKey []byte `json:"public_key"`
}

// TestIntegration runs the controller in-process against a real kube-apiserver and a real
// spire-server, and checks SPIRE's state through the real spire-server CLI.
func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real etcd, kube-apiserver and spire-server; skipped with -short")
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	kube := realcluster.NewKube(t, realcluster.KubeOptions{})
	spireServer := realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
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
	client := dial(ctx, t, spireServer.SocketPath())
	counting := &countingClient{FederationClient: client}

	factory := spireinformers.NewSharedInformerFactory(spireAPI, 0)
	c, err := NewController(ctx, factory.Spire().V1alpha1().ClusterFederatedTrustDomains(), kubeClient, spireAPI, counting, Options{
		Options: fedreconciler.Options{TrustDomain: spiffeid.RequireTrustDomainFromString(spireServer.TrustDomain())},
		// Long, so that the test decides when full resyncs run.
		ResyncInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx, 2) })
	defer func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}()

	poll := func(what string, cond func() (bool, error)) {
		t.Helper()
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			ok, err := cond()
			last = err
			return ok && err == nil, nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
		}
	}
	poll("initial resync", func() (bool, error) { return c.HasSynced(), nil })

	// show returns SPIRE's relationships, as the real CLI prints them, by trust domain.
	show := func() (map[string]realcluster.FederationRelationship, error) {
		rels, err := spireServer.FederationShow(ctx)
		if err != nil {
			return nil, err
		}
		out := map[string]realcluster.FederationRelationship{}
		for _, r := range rels {
			out[r.TrustDomain] = r
		}
		return out, nil
	}
	// expect polls until SPIRE holds exactly the given trust domains and check passes.
	expect := func(what string, tds []string, check func(map[string]realcluster.FederationRelationship) error) {
		t.Helper()
		poll(what, func() (bool, error) {
			rels, err := show()
			if err != nil {
				return false, err
			}
			got := slices.Sorted(maps.Keys(rels))
			if strings.Join(got, ",") != strings.Join(tds, ",") {
				return false, fmt.Errorf("SPIRE holds %v, want %v", got, tds)
			}
			if check != nil {
				return true, check(rels)
			}
			return true, nil
		})
	}
	bundleOf := func(r realcluster.FederationRelationship) (*cliBundle, error) {
		if len(r.TrustDomainBundle) == 0 || string(r.TrustDomainBundle) == "null" {
			return nil, fmt.Errorf("%s has no bundle", r.TrustDomain)
		}
		var b cliBundle
		if err := json.Unmarshal(r.TrustDomainBundle, &b); err != nil {
			return nil, fmt.Errorf("decoding bundle %s: %w", r.TrustDomainBundle, err)
		}
		return &b, nil
	}
	// quiet checks that a full resync against the real server finds nothing to write: what
	// SPIRE echoes compares equal to what the resources declare.
	quiet := func(step string) {
		t.Helper()
		counting.take()
		if err := c.fullResync(ctx); err != nil {
			t.Fatalf("%s: full resync: %v", step, err)
		}
		if writes, codes := counting.take(); writes != 0 {
			t.Errorf("%s: a full resync with nothing changed made %d writes (failed items: %v)", step, writes, codes)
		}
	}
	resources := spireAPI.SpireV1alpha1().ClusterFederatedTrustDomains()
	create := func(name string, spec spirev1alpha1.ClusterFederatedTrustDomainSpec) *spirev1alpha1.ClusterFederatedTrustDomain {
		t.Helper()
		obj, err := resources.Create(ctx, &spirev1alpha1.ClusterFederatedTrustDomain{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		return obj
	}
	update := func(obj *spirev1alpha1.ClusterFederatedTrustDomain, mutate func(*spirev1alpha1.ClusterFederatedTrustDomainSpec)) *spirev1alpha1.ClusterFederatedTrustDomain {
		t.Helper()
		// The controller writes status, so always edit the latest version.
		latest, err := resources.Get(ctx, obj.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("getting %s: %v", obj.Name, err)
		}
		mutate(&latest.Spec)
		updated, err := resources.Update(ctx, latest, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("updating %s: %v", obj.Name, err)
		}
		return updated
	}
	remove := func(name string) {
		t.Helper()
		if err := resources.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s: %v", name, err)
		}
	}
	expectEvent := func(name, reason, substring string) {
		t.Helper()
		poll(fmt.Sprintf("%s event on %s", reason, name), func() (bool, error) {
			events, err := kubeClient.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
			})
			if err != nil {
				return false, err
			}
			for _, e := range events.Items {
				if e.Reason == reason && strings.Contains(e.Message, substring) {
					return true, nil
				}
			}
			return false, fmt.Errorf("%d events, none %s with %q", len(events.Items), reason, substring)
		})
	}

	expectReady := func(name string, status metav1.ConditionStatus, reason string) {
		t.Helper()
		poll(fmt.Sprintf("Ready=%s %s on %s", status, reason, name), func() (bool, error) {
			cftd, err := spireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(cftd.Status.Conditions, "Ready")
			return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == cftd.Generation, nil
		})
	}

	// Nothing is reachable at the bundle endpoints, so SPIRE never replaces a bundle with one
	// it fetched itself.
	const endpoint = "https://127.0.0.1:1"
	ca1, ca2 := newCA(t, "spiffe.test"), newCA(t, "spiffe.test")
	jwtKeys := map[string]crypto.PublicKey{"key-1": newJWTKey(t)}
	jwtDER, err := x509.MarshalPKIXPublicKey(jwtKeys["key-1"])
	if err != nil {
		t.Fatal(err)
	}

	t.Log("create https_web and https_spiffe with a bundle")
	web := create("web", webSpec("web.test", endpoint+"/web"))
	spf := create("spiffe", spiffeSpec("spiffe.test", endpoint+"/spiffe", "spiffe://spiffe.test/spire/server",
		bundleDoc(t, "spiffe.test", []*x509.Certificate{ca1}, jwtKeys, 5*time.Minute, 1)))
	expect("created relationships", []string{"spiffe.test", "web.test"}, func(rels map[string]realcluster.FederationRelationship) error {
		// The bundle is compared decoded, below.
		want := map[string]realcluster.FederationRelationship{
			"web.test": {TrustDomain: "web.test", BundleEndpointURL: endpoint + "/web", Profile: "https_web"},
			"spiffe.test": {TrustDomain: "spiffe.test", BundleEndpointURL: endpoint + "/spiffe", Profile: "https_spiffe",
				EndpointSPIFFEID: "spiffe://spiffe.test/spire/server"},
		}
		if diff := cmp.Diff(want, rels, cmpopts.IgnoreFields(realcluster.FederationRelationship{}, "TrustDomainBundle")); diff != "" {
			return fmt.Errorf("relationships (-want +got):\n%s", diff)
		}
		b, err := bundleOf(rels["spiffe.test"])
		if err != nil {
			return err
		}
		wantBundle := &cliBundle{TrustDomain: "spiffe.test", X509Authorities: []cliX509Authority{{ASN1: ca1.Raw}},
			JWTAuthorities: []cliJWTAuthority{{KeyID: "key-1", PublicKey: jwtDER}}, RefreshHint: "300", SequenceNumber: "1"}
		if diff := cmp.Diff(wantBundle, b); diff != "" {
			return fmt.Errorf("spiffe.test bundle (-want +got):\n%s", diff)
		}
		return nil
	})
	quiet("after create")

	t.Log("update the URL of one and the bundle of the other")
	web = update(web, func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) { s.BundleEndpointURL = endpoint + "/web/v2" })
	update(spf, func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
		s.TrustDomainBundle = bundleDoc(t, "spiffe.test", []*x509.Certificate{ca2}, jwtKeys, 5*time.Minute, 2)
	})
	expect("updated relationships", []string{"spiffe.test", "web.test"}, func(rels map[string]realcluster.FederationRelationship) error {
		if got := rels["web.test"].BundleEndpointURL; got != endpoint+"/web/v2" {
			return fmt.Errorf("web.test URL = %s", got)
		}
		b, err := bundleOf(rels["spiffe.test"])
		if err != nil {
			return err
		}
		if len(b.X509Authorities) != 1 || !bytes.Equal(b.X509Authorities[0].ASN1, ca2.Raw) || b.SequenceNumber != "2" {
			return fmt.Errorf("spiffe.test bundle = %s", rels["spiffe.test"].TrustDomainBundle)
		}
		return nil
	})
	quiet("after update")

	// What admission can check (http URLs, a missing endpoint ID) never gets this far: these
	// are what only the controller can see.
	t.Log("invalid resources disturb nothing")
	update(web, func(s *spirev1alpha1.ClusterFederatedTrustDomainSpec) {
		s.BundleEndpointURL = endpoint + "/web/v3"
		s.TrustDomainBundle = "{not a bundle"
	})
	create("bad", spiffeSpec("bad.test", endpoint+"/bad", "spiffe://Bad.test/Not Valid", ""))
	create("own", webSpec(spireServer.TrustDomain(), endpoint+"/own"))
	// creationTimestamp has a resolution of one second, and a tie is broken by the UIDs,
	// which are random: make this resource younger than "spiffe" for certain.
	time.Sleep(time.Second)
	create("z-conflict", webSpec("spiffe.test", endpoint+"/conflict"))
	expectEvent("web", spirev1alpha1.ReasonInvalidSpec, "spec.trustDomainBundle")
	expectEvent("bad", spirev1alpha1.ReasonInvalidSpec, "spec.bundleEndpointProfile.endpointSPIFFEID")
	expectEvent("own", spirev1alpha1.ReasonInvalidSpec, "spec.trustDomain")
	expectEvent("z-conflict", spirev1alpha1.ReasonFederationConflict, `"spiffe"`)
	expectReady("web", metav1.ConditionFalse, spirev1alpha1.ReasonInvalidSpec)
	expectReady("bad", metav1.ConditionFalse, spirev1alpha1.ReasonInvalidSpec)
	expectReady("z-conflict", metav1.ConditionFalse, spirev1alpha1.ReasonFederationConflict)
	expectReady("spiffe", metav1.ConditionTrue, spirev1alpha1.ReasonRelationshipSet)
	expect("relationships untouched", []string{"spiffe.test", "web.test"}, func(rels map[string]realcluster.FederationRelationship) error {
		if got := rels["web.test"].BundleEndpointURL; got != endpoint+"/web/v2" {
			return fmt.Errorf("web.test URL = %s, want it kept", got)
		}
		if got := rels["spiffe.test"].BundleEndpointURL; got != endpoint+"/spiffe" {
			return fmt.Errorf("spiffe.test URL = %s, want the older resource's", got)
		}
		return nil
	})
	quiet("with invalid resources")

	t.Log("a relationship created behind the controller's back: SPIRE answers INTERNAL to the create")
	if _, err := spireServer.CLI(ctx, "federation create", "-trustDomain", "oob.test",
		"-bundleEndpointURL", endpoint+"/oob", "-bundleEndpointProfile", "https_web"); err != nil {
		t.Fatal(err)
	}
	counting.take()
	create("oob", webSpec("oob.test", endpoint+"/oob/v2"))
	expect("adopted relationship", []string{"oob.test", "spiffe.test", "web.test"}, func(rels map[string]realcluster.FederationRelationship) error {
		if got := rels["oob.test"].BundleEndpointURL; got != endpoint+"/oob/v2" {
			return fmt.Errorf("oob.test URL = %s", got)
		}
		return nil
	})
	// SPIRE v1.13 reports the duplicate as INTERNAL, not ALREADY_EXISTS; the controller
	// refreshed its cache and updated instead.
	if _, failed := counting.take(); strings.Join(failed, ";") != "create oob.test Internal" {
		t.Errorf("failed items = %q, want the one create SPIRE refused with INTERNAL", failed)
	}

	t.Log("the full resync repairs out-of-band deletes and removes undeclared relationships")
	if _, err := spireServer.CLI(ctx, "federation delete", "-id", "spiffe.test"); err != nil {
		t.Fatal(err)
	}
	if _, err := spireServer.CLI(ctx, "federation create", "-trustDomain", "stray.test",
		"-bundleEndpointURL", endpoint+"/stray", "-bundleEndpointProfile", "https_web"); err != nil {
		t.Fatal(err)
	}
	if err := c.fullResync(ctx); err != nil {
		t.Fatal(err)
	}
	expect("repaired relationships", []string{"oob.test", "spiffe.test", "web.test"}, nil)

	t.Log("deletes: the next-oldest resource takes over, the last one's relationship goes")
	remove("spiffe")
	expect("conflict takes over", []string{"oob.test", "spiffe.test", "web.test"}, func(rels map[string]realcluster.FederationRelationship) error {
		if got := rels["spiffe.test"].BundleEndpointURL; got != endpoint+"/conflict" {
			return fmt.Errorf("spiffe.test URL = %s", got)
		}
		return nil
	})
	for _, name := range []string{"z-conflict", "web", "oob", "bad", "own"} {
		remove(name)
	}
	expect("all deleted", nil, nil)
	quiet("at the end")
}
