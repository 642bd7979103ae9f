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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

func (e *itEnv) staticEntry(name string, spec spirev1alpha1.ClusterStaticEntrySpec) *spirev1alpha1.ClusterStaticEntry {
	e.t.Helper()
	spec.ClassName = e.prefix
	cse, err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Create(e.ctx, &spirev1alpha1.ClusterStaticEntry{
		ObjectMeta: metav1.ObjectMeta{Name: e.name(name)}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cse
}

// waitForStaticStatus waits until a ClusterStaticEntry's status says want and its Ready
// condition has the given reason.
func (e *itEnv) waitForStaticStatus(name string, want spirev1alpha1.ClusterStaticEntryStatus, reason string) {
	e.t.Helper()
	e.eventually("status of "+name, 30*time.Second, func() (bool, error) {
		cse, err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := cse.Status
		ready := meta.FindStatusCondition(s.Conditions, "Ready")
		return s.Rendered == want.Rendered && s.Masked == want.Masked && s.Set == want.Set &&
			ready != nil && ready.Reason == reason && ready.ObservedGeneration == cse.Generation, nil
	})
}

func TestClusterStaticEntries(t *testing.T) {
	e := newITEnv(t)
	e.startController("")

	db := e.staticEntry("db", spirev1alpha1.ClusterStaticEntrySpec{
		SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server",
		Selectors: []string{"unix:uid:999"}, DNSNames: []string{"db.example.com"},
		X509SVIDTTL: metav1.Duration{Duration: time.Hour}, Hint: "db", StoreSVID: true,
	})
	e.waitForSPIFFEIDs("spiffe://example.org/db")
	set := spirev1alpha1.ClusterStaticEntryStatus{Rendered: true, Set: true}
	e.waitForStaticStatus(db.Name, set, "EntrySet")
	got := e.oracleBySPIFFEID()["spiffe://example.org/db"]
	want := realcluster.Entry{SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server",
		Selectors: []realcluster.Selector{{Type: "unix", Value: "uid:999"}}, X509SVIDTTL: 3600,
		DNSNames: []string{"db.example.com"}, StoreSVID: true, Hint: "db"}
	// SPIRE assigns the ID, the revision and the creation time.
	assigned := cmpopts.IgnoreFields(realcluster.Entry{}, "ID", "RevisionNumber", "CreatedAt")
	if diff := cmp.Diff(want, got, assigned, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("entry (-want +got):\n%s", diff)
	}

	// A younger resource declaring the same entry is masked and writes nothing. Creation times
	// have 1-second resolution and equal ones are ordered by UID, as in spire-controller-manager:
	// let a second pass so that the twin is younger for sure.
	time.Sleep(time.Until(db.CreationTimestamp.Add(1100 * time.Millisecond)))
	twin := e.staticEntry("db-twin", spirev1alpha1.ClusterStaticEntrySpec{
		SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:999"},
	})
	e.waitForStaticStatus(twin.Name, spirev1alpha1.ClusterStaticEntryStatus{Rendered: true, Masked: true}, "Masked")
	if en := e.oracleBySPIFFEID()["spiffe://example.org/db"]; en.Hint != "db" || en.ID != got.ID {
		t.Errorf("the masked twin changed the entry: %+v", en)
	}

	// An invalid one (admission cannot know the trust domain) is reported and harms nothing.
	bad := e.staticEntry("bad", spirev1alpha1.ClusterStaticEntrySpec{
		SPIFFEID: "spiffe://other.org/bad", ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:1"},
	})
	e.waitForStaticStatus(bad.Name, spirev1alpha1.ClusterStaticEntryStatus{}, "InvalidSpec")
	e.eventually("InvalidSpec event", 30*time.Second, func() (bool, error) {
		events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + bad.Name + ",reason=InvalidSpec"})
		return err == nil && len(events.Items) > 0, err
	})
	e.waitForSPIFFEIDs("spiffe://example.org/db")

	// Editing the winner's identity moves the entry; the twin takes over the old one.
	cur, err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Get(e.ctx, db.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.SPIFFEID = "spiffe://example.org/db-v2"
	if _, err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Update(e.ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitForSPIFFEIDs("spiffe://example.org/db", "spiffe://example.org/db-v2")
	e.waitForStaticStatus(twin.Name, set, "EntrySet")
	e.waitForStaticStatus(db.Name, set, "EntrySet")

	// Deleting resources deletes their entries.
	for _, name := range []string{db.Name, twin.Name} {
		if err := e.spireAPI.SpireV1alpha1().ClusterStaticEntries().Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitForSPIFFEIDs()
}
