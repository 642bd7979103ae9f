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
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// TestRefusedReplacementRemovesTheOldIdentity edits a ClusterSPIFFEID's template together with
// a federatesWith naming a trust domain SPIRE holds no bundle for, so that SPIRE refuses every
// new entry. The pods' old SPIFFE IDs, which nothing declares any more, must go all the same
// (fail closed, as spire-controller-manager's delete-then-create ends), and the refusal is
// reported in the ClusterSPIFFEID's status and Events.
func TestRefusedReplacementRemovesTheOldIdentity(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("refused", nil)
	node := e.node("node")
	for i := range 3 {
		e.pod(ns, fmt.Sprintf("web-%d", i), node.Name, map[string]string{"app": "web"})
	}
	web := e.clusterSPIFFEID("web", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/old/{{ .PodMeta.Name }}",
		NamespaceSelector: sel(map[string]string{"kubernetes.io/metadata.name": ns}),
		PodSelector:       sel(map[string]string{"app": "web"}),
	})
	e.startController("")
	e.waitForSPIFFEIDs("spiffe://example.org/old/web-0", "spiffe://example.org/old/web-1", "spiffe://example.org/old/web-2")

	web, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, web.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web.Spec.SPIFFEIDTemplate = "spiffe://{{ .TrustDomain }}/new/{{ .PodMeta.Name }}"
	web.Spec.FederatesWith = []string{"partner.org"}
	if _, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Update(e.ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	edited := time.Now()
	e.waitForSPIFFEIDs()
	t.Logf("the refused replacement's old entries were gone %v after the edit", time.Since(edited))

	want := spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 1, PodsSelected: 3, EntriesToSet: 3, EntryFailures: 3}
	e.eventually("the refused entries reported in the status", 30*time.Second, func() (bool, error) {
		got, err := e.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(e.ctx, web.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.Stats != want {
			return false, fmt.Errorf("stats %+v, want %+v", got.Status.Stats, want)
		}
		return true, nil
	})
	e.eventually("a WriteFailed Event on the ClusterSPIFFEID", 30*time.Second, func() (bool, error) {
		events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + web.Name})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(ev corev1.Event) bool {
			return ev.Reason == spirev1alpha1.ReasonWriteFailed && strings.Contains(ev.Message, "partner.org")
		}), nil
	})
}

// TestStaticEntryChangesMadeWhileSPIREIsDownApplyOnReturn deletes one ClusterStaticEntry and
// changes another's selectors while spire-server is down, with a resync interval far longer
// than the test. Once SPIRE is back, both old entries must go and the new one appear within
// seconds: the controller must neither forget the old keys because its first attempt failed,
// nor wait out minutes of retry backoff.
func TestStaticEntryChangesMadeWhileSPIREIsDownApplyOnReturn(t *testing.T) {
	e := newITEnv(t)
	spec := func(path, uid string) spirev1alpha1.ClusterStaticEntrySpec {
		return spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/" + path,
			ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:" + uid}}
	}
	gone := e.staticEntry("gone", spec("gone", "1"))
	moved := e.staticEntry("moved", spec("moved", "1"))
	var rec *writeRecorder
	rc := e.launchController(e.prefix, "gcInterval: 10m\n", func(api spire.API) spire.API {
		rec = &writeRecorder{API: api}
		return rec
	})
	e.eventually("controller ready", 30*time.Second, func() (bool, error) { return rc.ready(), nil })
	e.waitForSPIFFEIDs("spiffe://example.org/gone", "spiffe://example.org/moved")
	old := map[string]string{}
	for _, en := range e.entries() {
		old[en.GetSpiffeId().GetPath()] = en.GetId()
	}

	e.spire.Kill()
	if err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Delete(e.ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	moved, err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Get(e.ctx, moved.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved.Spec.Selectors = []string{"unix:uid:2"}
	if _, err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Update(e.ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("both old entries' deletes attempted while SPIRE is down", 30*time.Second, func() (bool, error) {
		deletes := rec.deletes()
		return slices.Contains(deletes, old["/gone"]) && slices.Contains(deletes, old["/moved"]), nil
	})
	// An outage long enough for per-key backoff to grow to seconds.
	time.Sleep(15 * time.Second)
	if err := e.spire.Restart(e.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	e.eventually("SPIRE to hold only the moved entry with its new selector", 20*time.Second, func() (bool, error) {
		es, err := e.client.ListEntries(e.ctx)
		if err != nil {
			return false, err
		}
		if len(es) != 1 || es[0].GetSpiffeId().GetPath() != "/moved" {
			return false, fmt.Errorf("entries %v", spiffeIDs(es))
		}
		if sels := es[0].GetSelectors(); len(sels) != 1 || sels[0].GetValue() != "uid:2" {
			return false, fmt.Errorf("selectors %v", sels)
		}
		return true, nil
	})
	t.Logf("the changes made while SPIRE was down were applied %v after it was back (gcInterval 10m)", time.Since(back))
}
