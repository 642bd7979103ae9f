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

package explain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// TestClusterSPIFFEIDCountsAndFailures explains a ClusterSPIFFEID over pods in each state and
// checks the counts and the first failures, by namespace and name, within the limit.
func TestClusterSPIFFEIDCountsAndFailures(t *testing.T) {
	target := clusterSPIFFEID("sa", 1)
	target.Status.Stats = spirev1alpha1.ClusterSPIFFEIDStats{PodsSelected: 7}
	older := clusterSPIFFEID("older", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
		s.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"masked": "yes"}}
	})
	all := a(target, older)
	pod := func(name string, mutate func(*PodInput)) PodInput {
		in := testPod()
		in.Pod.Name, in.Pod.UID = name, k8stypes.UID("uid-"+name)
		in.Pod.Spec.ServiceAccountName = name
		if mutate != nil {
			mutate(&in)
		}
		return in
	}
	entryOfPod := func(name string) *spiretypes.Entry {
		e := webEntry("e-" + name)
		e.SpiffeId.Path = "/ns/app/sa/" + name
		e.Selectors[0].Value = "pod-uid:uid-" + name
		return e
	}
	in := ClusterSPIFFEIDInput{
		ClusterSPIFFEID:  target,
		ClusterSPIFFEIDs: all,
		Namespaces: []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, {ObjectMeta: metav1.ObjectMeta{Name: "ignored"}},
		},
		Pods: []PodInput{
			pod("d-synced", func(in *PodInput) { in.SPIREEntries = a(entryOfPod("d-synced")) }),
			pod("c-missing", nil),
			pod("b-unscheduled", func(in *PodInput) { in.Pod.Spec.NodeName, in.Node = "", nil }),
			pod("a-outdated", func(in *PodInput) {
				e := entryOfPod("a-outdated")
				e.Admin = true
				in.SPIREEntries = a(e)
			}),
			pod("e-masked", func(in *PodInput) {
				in.Pod.Labels = map[string]string{"masked": "yes"}
				in.Pod.Spec.ServiceAccountName = "x"
			}),
			pod("f-finished", func(in *PodInput) { in.Pod.Status.Phase = corev1.PodFailed }),
			pod("g-missing", nil),
			pod("ignored", func(in *PodInput) { setNamespace(in, "ignored") }),
		},
	}
	got := testExplainer(t, "").ClusterSPIFFEID(in, 3)
	wantCounts := Counts{NamespacesSelected: 2, NamespacesIgnored: 1, PodsSelected: 7, Rendered: 4, InSync: 1, Outdated: 1, Missing: 2,
		Masked: 1, RenderFailed: 1, NotScheduled: 1, Finished: 1}
	if diff := cmp.Diff(wantCounts, got.Observed); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	wantFailures := []PodFailure{
		{Pod: "app/a-outdated", Reason: StateOutdated, Message: "SPIRE entry e-a-outdated differs in [admin]"},
		{Pod: "app/b-unscheduled", Reason: ReasonPodNotScheduled, Message: "the pod has no node yet; its entry is rendered once it is scheduled"},
		{Pod: "app/c-missing", Reason: StateMissing, Message: "SPIRE holds no entry spiffe://example.org/ns/app/sa/c-missing for the pod"},
	}
	if diff := cmp.Diff(wantFailures, got.Failures); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	if got.MoreFailures != 1 {
		t.Errorf("moreFailures %d, want 1 (g-missing)", got.MoreFailures)
	}
	if got.Status.PodsSelected != 7 || !got.Handled {
		t.Errorf("status %+v handled %v, want the stats as written and handled", got.Status, got.Handled)
	}
}

// TestClusterSPIFFEIDNotHandled checks that a ClusterSPIFFEID of another class says so.
func TestClusterSPIFFEIDNotHandled(t *testing.T) {
	c := clusterSPIFFEID("other", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.ClassName = "x" })
	got := testExplainer(t, "").ClusterSPIFFEID(ClusterSPIFFEIDInput{ClusterSPIFFEID: c}, 10)
	if got.Handled || got.Reason != ReasonClassMismatch {
		t.Errorf("handled %v reason %q, want not handled, %s", got.Handled, got.Reason, ReasonClassMismatch)
	}
}
