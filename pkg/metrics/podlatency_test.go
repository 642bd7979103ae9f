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

package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type recordingObserver struct{ values []float64 }

func (o *recordingObserver) Observe(v float64) { o.values = append(o.values, v) }

func TestPodEntryLatencyTracker(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	eligible := now.Add(-3 * time.Second)
	wroteAll := PodSync{Eligible: eligible, Wrote: true, Complete: true}
	wroteSome := PodSync{Eligible: eligible, Wrote: true}
	inPlace := PodSync{Eligible: eligible, HadEntries: true, Complete: true}
	tests := []struct {
		name  string
		syncs []PodSync
		want  []float64
	}{
		{"a new pod's first sync writes all its entries", []PodSync{wroteAll}, []float64{3}},
		{"observed once, whatever later syncs write", []PodSync{wroteAll, {Eligible: eligible, HadEntries: true, Wrote: true, Complete: true}}, []float64{3}},
		{"a sync that writes only some waits for the one that completes", []PodSync{
			wroteSome, {Eligible: eligible, HadEntries: true, Wrote: true, Complete: true}}, []float64{3}},
		{"syncs before any entry is written observe nothing", []PodSync{{Eligible: eligible}, {Eligible: eligible}, wroteAll}, []float64{3}},
		{"entries found in place (a restart) are never observed", []PodSync{inPlace, {Eligible: eligible, HadEntries: true, Wrote: true, Complete: true}}, nil},
		{"an old pod whose template changed is not observed", []PodSync{{Eligible: eligible, HadEntries: true, Wrote: true, Complete: true}}, nil},
		{"a pod found with its entries, then emptied and refilled, is not observed", []PodSync{inPlace, {Eligible: eligible}, wroteAll}, nil},
		{"a pod gone is forgotten: its UID starts afresh", []PodSync{wroteAll, {Gone: true}, wroteAll}, []float64{3, 3}},
		{"a pod without eligibility time is not observed", []PodSync{{Wrote: true, Complete: true}}, nil},
		{"a clock behind the apiserver's observes zero", []PodSync{{Eligible: now.Add(time.Second), Wrote: true, Complete: true}}, []float64{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &recordingObserver{}
			tracker := newPodEntryLatencyTracker(o, func() time.Time { return now })
			for _, s := range tt.syncs {
				tracker.Synced("pod-uid", s)
			}
			if diff := cmp.Diff(tt.want, o.values); diff != "" {
				t.Errorf("observed latencies (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodEntryLatencyTrackerForgetsGonePods(t *testing.T) {
	tracker := newPodEntryLatencyTracker(&recordingObserver{}, time.Now)
	tracker.Synced("a", PodSync{HadEntries: true})
	tracker.Synced("b", PodSync{Wrote: true})
	tracker.Synced("a", PodSync{Gone: true})
	tracker.Synced("b", PodSync{Gone: true})
	if len(tracker.pods) != 0 {
		t.Errorf("tracker still holds %d pods after all are gone", len(tracker.pods))
	}
}

func TestPodEligibleSince(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	scheduled := metav1.NewTime(created.Add(90 * time.Second))
	tests := []struct {
		name string
		pod  corev1.Pod
		want time.Time
	}{
		{"scheduled by the scheduler: the condition's transition",
			corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Spec: corev1.PodSpec{NodeName: "n"},
				Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
					{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(scheduled.Add(time.Hour))},
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduled}}}},
			scheduled.Time},
		{"created with a node: its creation", corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Spec: corev1.PodSpec{NodeName: "n"}}, created.Time},
		{"unschedulable: not eligible", corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, LastTransitionTime: scheduled}}}},
			time.Time{}},
		{"pending without a node: not eligible", corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodEligibleSince(&tt.pod); !got.Equal(tt.want) {
				t.Errorf("PodEligibleSince = %v, want %v", got, tt.want)
			}
		})
	}
}
