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

package runner

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// TestStatusWriterWritesChangesOnly: a status is written when it changes and not again when it
// does not; a dry run, or a writer with no client, writes nothing but still reports the
// change; and once an echo drops the conditions it carried, conditions are left out, so that
// a CRD without status.conditions is not written at every sync.
func TestStatusWriterWritesChangesOnly(t *testing.T) {
	ctx := context.Background()
	ready := metav1.Condition{Type: spirev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: spirev1alpha1.ReasonEntrySet}
	setRendered := func(o *spirev1alpha1.ClusterStaticEntry) { o.Status.Rendered = true }
	conditions := func(o *spirev1alpha1.ClusterStaticEntry) *[]metav1.Condition { return &o.Status.Conditions }
	newWriter := func(dryRun, noClient bool) (*StatusWriter[*spirev1alpha1.ClusterStaticEntry], *spirefake.Clientset, *spirev1alpha1.ClusterStaticEntry) {
		obj := &spirev1alpha1.ClusterStaticEntry{ObjectMeta: metav1.ObjectMeta{Name: "static"}}
		client := spirefake.NewSimpleClientset(obj)
		update := client.SpireV1alpha1().ClusterStaticEntries().UpdateStatus
		if noClient {
			update = nil
		}
		return NewStatusWriter("ClusterStaticEntry", update, dryRun, conditions), client, obj
	}
	updates := func(client *spirefake.Clientset) int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}

	w, client, obj := newWriter(false, false)
	if changed, err := w.Write(ctx, obj, setRendered, ready); !changed || err != nil {
		t.Fatalf("first write: changed %t, %v; want a change written", changed, err)
	}
	written, err := client.SpireV1alpha1().ClusterStaticEntries().Get(ctx, "static", metav1.GetOptions{})
	if err != nil || !written.Status.Rendered || len(written.Status.Conditions) != 1 {
		t.Fatalf("status written: %+v, %v", written, err)
	}
	if changed, err := w.Write(ctx, written, setRendered, ready); changed || err != nil || updates(client) != 1 {
		t.Errorf("unchanged status: changed %t, %v, %d writes; want no second write", changed, err, updates(client))
	}

	for name, tc := range map[string]struct{ dryRun, noClient bool }{"dry run": {dryRun: true}, "no client": {noClient: true}} {
		w, client, obj := newWriter(tc.dryRun, tc.noClient)
		if changed, err := w.Write(ctx, obj, setRendered, ready); !changed || err != nil || updates(client) != 0 {
			t.Errorf("%s: changed %t, %v, %d writes; want the change reported and nothing written", name, changed, err, updates(client))
		}
	}

	w, client, obj = newWriter(false, false)
	client.PrependReactor("update", "clusterstaticentries", func(a k8stesting.Action) (bool, runtime.Object, error) {
		echo := a.(k8stesting.UpdateAction).GetObject().DeepCopyObject().(*spirev1alpha1.ClusterStaticEntry)
		echo.Status.Conditions = nil // as an API server whose CRD has no status.conditions
		return true, echo, nil
	})
	if _, err := w.Write(ctx, obj, setRendered, ready); err != nil {
		t.Fatal(err)
	}
	obj.Status.Rendered = true // what the informer then holds
	if changed, err := w.Write(ctx, obj, setRendered, ready); changed || err != nil || updates(client) != 1 {
		t.Errorf("after conditions were pruned: changed %t, %v, %d writes; want no second write", changed, err, updates(client))
	}
}

func TestConditionSupportLearnsPruning(t *testing.T) {
	var s ConditionSupport
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Set"}

	var conditions []metav1.Condition
	s.Set(&conditions, ready)
	if len(conditions) != 1 {
		t.Fatalf("before anything is learned, Set gives %v; want the condition", conditions)
	}
	// A schema that keeps conditions echoes them: nothing is learned.
	s.Learn(conditions, conditions)
	s.Learn(nil, nil)
	if s.Set(&conditions, ready); len(conditions) != 1 {
		t.Fatalf("after echoes that kept conditions, Set gives %v", conditions)
	}
	// A write that carried conditions comes back without them: the schema prunes them.
	s.Learn(conditions, nil)
	if s.Set(&conditions, ready); conditions != nil {
		t.Errorf("after a pruned echo, Set gives %v; want no conditions, as the schema keeps", conditions)
	}
}
