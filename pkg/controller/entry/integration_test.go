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

package entry_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const nsSATemplate = "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}"

var nsSASelectors = []string{"k8s:ns:{{ .PodMeta.Namespace }}", "k8s:sa:{{ .PodSpec.ServiceAccountName }}"}

// TestReconcileWalkThrough is the walk-through every user of SPIRE's controllers knows, against
// the real kube-apiserver and the real spire-server.
func TestReconcileWalkThrough(t *testing.T) {
	e := newITEnv(t)
	production := e.namespace("production", map[string]string{"env": "production"})
	development := e.namespace("development", map[string]string{"env": "development"})
	node1, node3 := e.node("node-1"), e.node("node-3")
	web := e.pod(production, "web-server", node1.Name, map[string]string{"app": "web-server"})
	api := e.pod(development, "api-server", node3.Name, map[string]string{"app": "api-server"})

	// SPIRE already holds entry-123 for the web-server pod (with one DNS name) and entry-456
	// for an app nobody declares any more.
	td := func(path string) *spiretypes.SPIFFEID {
		return &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: path}
	}
	results, err := e.client.CreateEntries(e.ctx, []*spiretypes.Entry{
		{Id: "entry-123", SpiffeId: td("/ns/" + production + "/sa/web-server"), ParentId: td("/k8s-node/" + node1.Name),
			Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:" + string(web.UID)},
				{Type: "k8s", Value: "ns:" + production}, {Type: "k8s", Value: "sa:web-server"}},
			DnsNames: []string{"web.example.com"}},
		{Id: "entry-456", SpiffeId: td("/ns/staging/sa/old-app"), ParentId: td("/k8s-node/node-2"),
			Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "ns:staging"}, {Type: "k8s", Value: "sa:old-app"}}},
	})
	if err != nil || results[0].Err != nil || results[1].Err != nil {
		t.Fatalf("seeding SPIRE: %v %v", err, results)
	}

	webID := e.clusterSPIFFEID("web-server-identity", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: nsSATemplate, NamespaceSelector: sel(map[string]string{"env": "production"}),
		PodSelector:      sel(map[string]string{"app": "web-server"}),
		DNSNameTemplates: []string{"web.example.com", "web-new.example.com"}, WorkloadSelectorTemplates: nsSASelectors,
	})
	apiID := e.clusterSPIFFEID("api-server-identity", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: nsSATemplate, NamespaceSelector: sel(map[string]string{"env": "development"}),
		PodSelector: sel(map[string]string{"app": "api-server"}), WorkloadSelectorTemplates: nsSASelectors,
	})

	start := time.Now()
	e.startController("parentIDTemplate: \"spiffe://{{ .TrustDomain }}/k8s-node/{{ .NodeMeta.Name }}\"\n")
	t.Logf("controller ready (first full reconcile done) after %v", time.Since(start))

	webSPIFFEID := "spiffe://example.org/ns/" + production + "/sa/web-server"
	apiSPIFFEID := "spiffe://example.org/ns/" + development + "/sa/api-server"
	e.waitForSPIFFEIDs(webSPIFFEID, apiSPIFFEID)

	got := e.oracleBySPIFFEID()
	if w := got[webSPIFFEID]; w.ID != "entry-123" || !slices.Equal(w.DNSNames, []string{"web.example.com", "web-new.example.com"}) {
		t.Errorf("web-server entry = %+v, want entry-123 reused with both DNS names", w)
	}
	if a := got[apiSPIFFEID]; a.ParentID != "spiffe://example.org/k8s-node/"+node3.Name ||
		selectorStrings(a.Selectors) != "k8s:ns:"+development+" k8s:pod-uid:"+string(api.UID)+" k8s:sa:api-server" {
		t.Errorf("api-server entry = %+v", a)
	}
	want := spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 1, EntriesToSet: 1}
	e.waitForStats(webID.Name, want)
	e.waitForStats(apiID.Name, want)
}

func TestPodLifecycle(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("apps", map[string]string{"team": "a"})
	node := e.node("node")
	clusterSPIFFEID := e.clusterSPIFFEID("apps", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}", NamespaceSelector: sel(map[string]string{"team": "a"}),
	})
	rc := e.startController("")

	// A new pod gets its entry, without the controller listing SPIRE.
	lists := rc.calls.lists.Load()
	start := time.Now()
	e.pod(ns, "web", node.Name, nil)
	e.waitForSPIFFEIDs("spiffe://example.org/pod/web")
	t.Logf("pod creation to entry in SPIRE: %v", time.Since(start))
	if n := rc.calls.lists.Load() - lists; n != 0 {
		t.Errorf("handling a pod event listed SPIRE %d times, want 0", n)
	}
	e.waitForStats(clusterSPIFFEID.Name, spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 1, EntriesToSet: 1})

	// Pods that are not running anywhere, or finished, get no entry.
	e.pod(ns, "unscheduled", "", nil)
	e.pod(ns, "done", node.Name, nil)
	if _, err := realcluster.SetPodPhase(e.ctx, e.kube, ns, "done", corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	// A later pod's entry proves the earlier events were handled.
	e.pod(ns, "marker", node.Name, nil)
	e.waitForSPIFFEIDs("spiffe://example.org/pod/web", "spiffe://example.org/pod/marker")

	// A pod that finishes loses its entry.
	if _, err := realcluster.SetPodPhase(e.ctx, e.kube, ns, "marker", corev1.PodFailed); err != nil {
		t.Fatal(err)
	}
	e.waitForSPIFFEIDs("spiffe://example.org/pod/web")

	// A deleted pod loses its entry. No kubelet runs here to finish a graceful deletion, so
	// the pod is deleted at once, as a kubelet does once the containers stopped.
	start = time.Now()
	if err := e.kube.CoreV1().Pods(ns).Delete(e.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	e.waitForSPIFFEIDs()
	t.Logf("pod deletion to entry gone: %v", time.Since(start))
}

func TestRelabelling(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("shop", map[string]string{"mesh": "on"})
	node := e.node("node")
	e.clusterSPIFFEID("mesh", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/{{ .PodMeta.Namespace }}/{{ .PodMeta.Name }}",
		NamespaceSelector: sel(map[string]string{"mesh": "on"}), PodSelector: sel(map[string]string{"identity": "yes"}),
	})
	e.pod(ns, "a", node.Name, map[string]string{"identity": "yes"})
	e.pod(ns, "b", node.Name, map[string]string{"identity": "no"})
	e.startController("")
	a, b := "spiffe://example.org/"+ns+"/a", "spiffe://example.org/"+ns+"/b"
	e.waitForSPIFFEIDs(a)

	relabelPod := func(name, value string) {
		p, err := e.kube.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Labels["identity"] = value
		if _, err := e.kube.CoreV1().Pods(ns).Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabelPod("b", "yes")
	e.waitForSPIFFEIDs(a, b)
	relabelPod("a", "no")
	e.waitForSPIFFEIDs(b)

	relabelNamespace := func(value string) {
		n, err := e.kube.CoreV1().Namespaces().Get(e.ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["mesh"] = value
		if _, err := e.kube.CoreV1().Namespaces().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabelNamespace("off")
	e.waitForSPIFFEIDs()
	relabelNamespace("on")
	e.waitForSPIFFEIDs(b)
}

func TestEditingAnIdentityUpdatesEntriesInPlace(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("web", nil)
	node := e.node("node")
	for _, name := range []string{"a", "b", "c"} {
		e.pod(ns, name, node.Name, map[string]string{"app": "web"})
	}
	clusterSPIFFEID := e.clusterSPIFFEID("web", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/web/{{ .PodMeta.Name }}",
		NamespaceSelector: sel(map[string]string{"kubernetes.io/metadata.name": ns}), PodSelector: sel(map[string]string{"app": "web"}),
	})
	e.startController("")
	e.waitForSPIFFEIDs("spiffe://example.org/web/a", "spiffe://example.org/web/b", "spiffe://example.org/web/c")
	idsBefore := map[string]string{}
	for _, en := range e.oracle() {
		idsBefore[selectorStrings(en.Selectors)] = en.ID
	}

	edit := func(mutate func(*spirev1alpha1.ClusterSPIFFEIDSpec)) {
		cur, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, clusterSPIFFEID.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mutate(&cur.Spec)
		if _, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Update(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sameIDs := func() {
		t.Helper()
		for _, en := range e.oracle() {
			if want := idsBefore[selectorStrings(en.Selectors)]; want != en.ID {
				t.Errorf("entry with selectors %s has ID %s, want %s kept", selectorStrings(en.Selectors), en.ID, want)
			}
		}
	}

	// A field outside the entry's identity: updated in place.
	edit(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
		s.DNSNameTemplates = []string{"{{ .PodMeta.Name }}.web.example.com"}
	})
	e.eventually("DNS names set", 30*time.Second, func() (bool, error) {
		for _, en := range e.entries() {
			if len(en.GetDnsNames()) != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	sameIDs()

	// The SPIFFE ID itself: still rewritten in place, so the pod never lacks an entry.
	edit(func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
		s.SPIFFEIDTemplate = "spiffe://{{ .TrustDomain }}/v2/{{ .PodMeta.Name }}"
	})
	e.waitForSPIFFEIDs("spiffe://example.org/v2/a", "spiffe://example.org/v2/b", "spiffe://example.org/v2/c")
	sameIDs()

	// Deleting the identity removes its entries.
	if err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Delete(e.ctx, clusterSPIFFEID.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForSPIFFEIDs()
}

func TestBrokenTemplateAffectsOnlyItsOwnPods(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("mixed", map[string]string{"env": "mixed"})
	node := e.node("node")
	e.pod(ns, "good", node.Name, map[string]string{"app": "good"})
	e.pod(ns, "bad", node.Name, map[string]string{"app": "bad"})
	good := e.clusterSPIFFEID("good", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/good/{{ .PodMeta.Name }}", PodSelector: sel(map[string]string{"app": "good"}),
		NamespaceSelector: sel(map[string]string{"env": "mixed"}),
	})
	// Renders a SPIFFE ID outside the trust domain: must never be written.
	escape := e.clusterSPIFFEID("escape", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://evil.org/{{ .PodMeta.Name }}", PodSelector: sel(map[string]string{"app": "bad"}),
		NamespaceSelector: sel(map[string]string{"env": "mixed"}),
	})
	// Fails to execute.
	broken := e.clusterSPIFFEID("broken", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/{{ .PodMeta.NoSuchField }}", PodSelector: sel(map[string]string{"app": "bad"}),
		NamespaceSelector: sel(map[string]string{"env": "mixed"}),
	})
	e.startController("")
	e.waitForSPIFFEIDs("spiffe://example.org/good/good")
	failure := spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 1, PodEntryRenderFailures: 1}
	e.waitForStats(escape.Name, failure)
	e.waitForStats(broken.Name, failure)
	e.waitForStats(good.Name, spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 1, EntriesToSet: 1})

	// The failure shows in the Ready condition, with a reason and a message to act on...
	e.eventually("Ready=False RenderFailed", 30*time.Second, func() (bool, error) {
		clusterSPIFFEID, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, escape.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(clusterSPIFFEID.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "RenderFailed" && strings.Contains(c.Message, "1 of 1"), nil
	})
	e.eventually("Ready=True EntriesSet", 30*time.Second, func() (bool, error) {
		clusterSPIFFEID, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, good.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(clusterSPIFFEID.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "EntriesSet", nil
	})
	// ...and each pod's render failure is explained in an Event on the ClusterSPIFFEID.
	e.eventually("RenderFailed event", 30*time.Second, func() (bool, error) {
		events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + escape.Name + ",reason=RenderFailed"})
		return err == nil && len(events.Items) > 0, err
	})
}

func TestRestartWithNothingChangedWritesNothing(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("steady", nil)
	node := e.node("node")
	var want []string
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		e.pod(ns, name, node.Name, nil)
		want = append(want, "spiffe://example.org/steady/"+name)
	}
	e.clusterSPIFFEID("steady", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/steady/{{ .PodMeta.Name }}",
		NamespaceSelector: sel(map[string]string{"kubernetes.io/metadata.name": ns}),
		DNSNameTemplates:  []string{"{{ .PodMeta.Name }}.example.com"}, FederatesWith: nil,
		TTL: metav1.Duration{Duration: time.Hour}, Hint: "steady",
	})
	first := e.startController("")
	e.waitForSPIFFEIDs(want...)
	before := e.oracle()
	first.stop()

	start := time.Now()
	second := e.startController("")
	t.Logf("restart to ready: %v", time.Since(start))
	// Give queued events (the informers' initial adds) time to be processed.
	time.Sleep(2 * time.Second)
	second.stop()
	if n := second.calls.writes.Load(); n != 0 {
		t.Errorf("restart made %d SPIRE write calls, want 0", n)
	}
	after := e.oracle()
	if len(after) != len(before) {
		t.Fatalf("entries %d after restart, want %d", len(after), len(before))
	}
	revisions := map[string]int64{}
	for _, en := range before {
		revisions[en.ID] = en.RevisionNumber
	}
	for _, en := range after {
		if rev, ok := revisions[en.ID]; !ok || rev != en.RevisionNumber {
			t.Errorf("entry %s changed across the restart (revision %d, was %d, known %v)", en.ID, en.RevisionNumber, rev, ok)
		}
	}
}
