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

package reconciler

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

func statsOf(c *StatusCounters, name string) spirev1alpha1.ClusterSPIFFEIDStats {
	// Namespace counts come from listers, not from the counters: they must be left alone.
	stats := spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 7, NamespacesIgnored: 3}
	c.Stats(name, &stats)
	return stats
}

func sortedUIDs(uids []types.UID) []types.UID {
	slices.Sort(uids)
	return uids
}

func TestStatusCountersRecord(t *testing.T) {
	c := NewStatusCounters()

	changed := c.Record("p1", PodOutcomes{"web": OutcomeSet, "mesh": OutcomeMasked})
	if diff := cmp.Diff([]string{"mesh", "web"}, sorted(changed)); diff != "" {
		t.Errorf("changed after the first record (-want +got):\n%s", diff)
	}
	c.Record("p2", PodOutcomes{"web": OutcomeEntryFailure})
	c.Record("p3", PodOutcomes{"web": OutcomeRenderFailure})

	want := spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 7, NamespacesIgnored: 3,
		EntriesToSet: 2, EntryFailures: 1, PodEntryRenderFailures: 1}
	if diff := cmp.Diff(want, statsOf(c, "web")); diff != "" {
		t.Errorf("web stats (-want +got):\n%s", diff)
	}
	want = spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 7, NamespacesIgnored: 3, EntriesMasked: 1}
	if diff := cmp.Diff(want, statsOf(c, "mesh")); diff != "" {
		t.Errorf("mesh stats (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]types.UID{"p1", "p2", "p3"}, sortedUIDs(c.Pods("web"))); diff != "" {
		t.Errorf("pods of web (-want +got):\n%s", diff)
	}

	// Recording the same outcomes changes nothing, so no status is rewritten.
	if changed := c.Record("p1", PodOutcomes{"web": OutcomeSet, "mesh": OutcomeMasked}); len(changed) != 0 {
		t.Errorf("an unchanged record changed %v", changed)
	}
	// One outcome changes, one ClusterSPIFFEID stops applying.
	if diff := cmp.Diff([]string{"mesh", "web"}, sorted(c.Record("p1", PodOutcomes{"web": OutcomeEntryFailure}))); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if got := c.Pods("mesh"); len(got) != 0 {
		t.Errorf("mesh still applies to %v", got)
	}
	// A pod that is gone applies to nothing.
	if diff := cmp.Diff([]string{"web"}, c.Record("p2", nil)); diff != "" {
		t.Errorf("changed when p2 went (-want +got):\n%s", diff)
	}
	want = spirev1alpha1.ClusterSPIFFEIDStats{NamespacesSelected: 7, NamespacesIgnored: 3,
		EntriesToSet: 1, EntryFailures: 1, PodEntryRenderFailures: 1}
	if diff := cmp.Diff(want, statsOf(c, "web")); diff != "" {
		t.Errorf("web stats at the end (-want +got):\n%s", diff)
	}
}

func TestStatusCountersReplaceAllExcept(t *testing.T) {
	c := NewStatusCounters()
	c.Record("p1", PodOutcomes{"web": OutcomeSet})
	c.Record("p2", PodOutcomes{"mesh": OutcomeSet})
	c.Record("p3", PodOutcomes{"db": OutcomeSet})

	// A full resync finds p1 unchanged, p2 gone and p4 new.
	changed := c.replaceAllExcept(map[types.UID]PodOutcomes{
		"p1": {"web": OutcomeSet},
		"p3": {"db": OutcomeSet},
		"p4": {"web": OutcomeMasked},
	}, func(types.UID) bool { return false })
	if diff := cmp.Diff([]string{"mesh", "web"}, sorted(changed)); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]types.UID{"p1", "p4"}, sortedUIDs(c.Pods("web"))); diff != "" {
		t.Errorf("pods of web (-want +got):\n%s", diff)
	}
	if got := c.Pods("mesh"); len(got) != 0 {
		t.Errorf("mesh still applies to %v after its pod went", got)
	}
}

func sorted(names []string) []string {
	slices.Sort(names)
	return names
}
