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
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
)

const baseConfig = `trustDomain: example.org
clusterName: c
clusterDomain: cluster.local
className: cls
ignoreNamespaces: [ignored]
`

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testExplainer(t *testing.T, extra string) *Explainer {
	t.Helper()
	cfg, err := config.Parse([]byte(baseConfig + extra))
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// testPod is the web pod in namespace app on node n1, with no ClusterSPIFFEID and no entry.
func testPod() PodInput {
	return PodInput{
		Pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "pod-uid", Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{NodeName: "n1", ServiceAccountName: "web"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		},
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"team": "a"}}},
		Node:      &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
	}
}

// clusterSPIFFEID is a ClusterSPIFFEID of class cls giving every pod the identity of its service
// account, created age minutes after the epoch.
func clusterSPIFFEID(name string, age int, mutate ...func(*spirev1alpha1.ClusterSPIFFEIDSpec)) *spirev1alpha1.ClusterSPIFFEID {
	c := &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name), CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute))},
		Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
			ClassName:        "cls",
			SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
		},
	}
	for _, m := range mutate {
		m(&c.Spec)
	}
	return c
}

// webEntry is the entry clusterSPIFFEID renders for testPod, as SPIRE holds it.
func webEntry(id string) *spiretypes.Entry {
	return &spiretypes.Entry{
		Id:        id,
		SpiffeId:  &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/ns/app/sa/web"},
		ParentId:  &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/spire/agent/k8s_psat/c/node-uid"},
		Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:pod-uid"}},
	}
}

func verdicts(p *Pod) map[string]string {
	out := map[string]string{}
	for _, v := range p.ClusterSPIFFEIDs {
		out[v.Name] = v.Reason
	}
	return out
}

func states(p *Pod) []string {
	var out []string
	for _, e := range p.Entries {
		out = append(out, e.ClusterSPIFFEID+":"+e.State)
	}
	return out
}

// TestPodReasons checks the verdict for each reason a ClusterSPIFFEID gives or does not give
// a pod an entry, and what the pod's entries are in SPIRE.
func TestPodReasons(t *testing.T) {
	matchPod := func(labels map[string]string) func(*spirev1alpha1.ClusterSPIFFEIDSpec) {
		return func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.PodSelector = &metav1.LabelSelector{MatchLabels: labels} }
	}
	fallback := func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
		s.Fallback = true
		s.SPIFFEIDTemplate = "spiffe://{{ .TrustDomain }}/fallback"
	}
	cases := []struct {
		name   string
		config string
		mutate func(*PodInput)
		// want are the verdict reasons by ClusterSPIFFEID; wantStates the entries' states.
		want         map[string]string
		wantStates   []string
		wantEligible string // the pod's reason when not eligible
		wantMessage  string // a substring of the first ClusterSPIFFEID's message
		wantSummary  string // a substring of the summary
	}{
		{
			name: "rendered and in sync",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0))
				in.SPIREEntries = a(webEntry("e1"))
			},
			want:        map[string]string{"sa": ReasonRendered},
			wantStates:  []string{"sa:InSync"},
			wantSummary: "1 entry in SPIRE as rendered",
		},
		{
			name: "rendered, missing in SPIRE",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0))
			},
			want:        map[string]string{"sa": ReasonRendered},
			wantStates:  []string{"sa:Missing"},
			wantSummary: "0 in sync, 0 outdated, 1 missing",
		},
		{
			name: "rendered, outdated in SPIRE",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
					s.DNSNameTemplates = []string{"web.app"}
				}))
				in.SPIREEntries = a(webEntry("e1"))
			},
			want:       map[string]string{"sa": ReasonRendered},
			wantStates: []string{"sa:Outdated"},
		},
		{
			name: "masked by the older declarer",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("young", 5), clusterSPIFFEID("old", 1))
				in.SPIREEntries = a(webEntry("e1"))
			},
			want:        map[string]string{"old": ReasonRendered, "young": ReasonMasked},
			wantStates:  []string{"old:InSync", "young:Masked"},
			wantMessage: "ClusterSPIFFEID old declares the same entry",
		},
		{
			name: "fallback suppressed by a regular one",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 1), clusterSPIFFEID("fb", 0, fallback))
			},
			want:        map[string]string{"sa": ReasonRendered, "fb": ReasonFallbackSuppressed},
			wantStates:  []string{"sa:Missing"},
			wantMessage: "regular ClusterSPIFFEIDs render entries for the pod (sa)",
		},
		{
			name: "fallback applies when the regular one fails to render",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("fb", 0, fallback), clusterSPIFFEID("broken", 1, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
					s.SPIFFEIDTemplate = "spiffe://other.org/x"
				}))
			},
			want:       map[string]string{"broken": ReasonRenderFailed, "fb": ReasonRendered},
			wantStates: []string{"fb:Missing"},
		},
		{
			name: "render failure",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("broken", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.SPIFFEIDTemplate = "spiffe://other.org/x" }))
			},
			want:        map[string]string{"broken": ReasonRenderFailed},
			wantMessage: "trust domain",
			wantSummary: "No identity: no entry renders; not rendered by broken (RenderFailed)",
		},
		{
			name: "class mismatch",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("other", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.ClassName = "x" }))
			},
			want:        map[string]string{"other": ReasonClassMismatch},
			wantMessage: `its className is "x", the controller's is "cls"`,
			wantSummary: `no ClusterSPIFFEID of the controller's class ("cls") selects the pod`,
		},
		{
			name: "classless without watchClassless",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("none", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) { s.ClassName = "" }))
			},
			want:        map[string]string{"none": ReasonClassMismatch},
			wantMessage: "watchClassless is false",
		},
		{
			name:        "not watched: lacks the label selector's labels",
			config:      "clusterSPIFFEIDLabelSelector: {tier: prod}\n",
			mutate:      func(in *PodInput) { in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0)) },
			want:        map[string]string{"sa": ReasonNotWatched},
			wantMessage: "tier=prod",
		},
		{
			name: "namespace selector mismatch",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("b", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
					s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
				}))
			},
			want:        map[string]string{"b": ReasonNamespaceSelectorMismatch},
			wantMessage: `namespaceSelector "team=b" does not match namespace app labels {team=a}`,
		},
		{
			name: "pod selector mismatch",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("db", 0, matchPod(map[string]string{"app": "db"})))
			},
			want:        map[string]string{"db": ReasonPodSelectorMismatch},
			wantMessage: `podSelector "app=db" does not match pod labels {app=web}`,
		},
		{
			name: "invalid selector",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("bad", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
					s.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
				}))
			},
			want:        map[string]string{"bad": ReasonInvalidSelector},
			wantMessage: "podSelector",
		},
		{
			name:         "namespace ignored",
			mutate:       func(in *PodInput) { in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0)); setNamespace(in, "ignored") },
			want:         map[string]string{"sa": ReasonNamespaceIgnored},
			wantEligible: ReasonNamespaceIgnored,
			wantMessage:  `namespace ignored matches ignoreNamespaces pattern "ignored"`,
			wantSummary:  "No identity: namespace ignored matches",
		},
		{
			name:         "namespace outside cacheNamespaces",
			config:       "cacheNamespaces: {other: {}}\n",
			mutate:       func(in *PodInput) { in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0)) },
			want:         map[string]string{"sa": ReasonNamespaceIgnored},
			wantEligible: ReasonNamespaceIgnored,
			wantMessage:  "namespace app is not in cacheNamespaces",
		},
		{
			name:         "pod outside cacheNamespaces' label selector",
			config:       "cacheNamespaces: {app: {labelSelectors: {spiffe: enabled}}}\n",
			mutate:       func(in *PodInput) { in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0)) },
			want:         map[string]string{"sa": ReasonPodNotWatched},
			wantEligible: ReasonPodNotWatched,
		},
		{
			name: "pod finished",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0))
				in.Pod.Status.Phase = corev1.PodSucceeded
				in.SPIREEntries = a(webEntry("e1"))
			},
			want:         map[string]string{"sa": ReasonPodFinished},
			wantEligible: ReasonPodFinished,
			wantMessage:  "phase Succeeded",
		},
		{
			name: "pod not scheduled",
			mutate: func(in *PodInput) {
				in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0))
				in.Pod.Spec.NodeName, in.Node = "", nil
			},
			want:        map[string]string{"sa": ReasonPodNotScheduled},
			wantSummary: "not rendered by sa (PodNotScheduled)",
		},
		{
			name:        "node not found",
			mutate:      func(in *PodInput) { in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0)); in.Node = nil },
			want:        map[string]string{"sa": ReasonNodeNotFound},
			wantMessage: "node n1 does not exist",
		},
		{
			name:         "ClusterSPIFFEIDs not reconciled",
			config:       "reconcile: {clusterStaticEntries: true}\n",
			mutate:       func(in *PodInput) { in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0)) },
			want:         map[string]string{"sa": ReasonClusterSPIFFEIDsNotReconciled},
			wantEligible: ReasonClusterSPIFFEIDsNotReconciled,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := testPod()
			tc.mutate(&in)
			got := testExplainer(t, tc.config).Pod(in)
			if diff := cmp.Diff(tc.want, verdicts(got)); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStates, states(got)); diff != "" {
				t.Errorf("entry states (-want +got):\n%s", diff)
			}
			if got.Eligible != (tc.wantEligible == "") || got.Reason != tc.wantEligible {
				t.Errorf("eligible %v reason %q, want reason %q", got.Eligible, got.Reason, tc.wantEligible)
			}
			if msg := got.ClusterSPIFFEIDs[len(got.ClusterSPIFFEIDs)-1].Message; tc.wantMessage != "" && !anyMessage(got, tc.wantMessage) {
				t.Errorf("no message contains %q; last one: %q", tc.wantMessage, msg)
			}
			if !strings.Contains(got.Summary, tc.wantSummary) {
				t.Errorf("summary %q does not contain %q", got.Summary, tc.wantSummary)
			}
			// Every explanation prints.
			var out bytes.Buffer
			if err := WritePodText(&out, got); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSON(&out, got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func anyMessage(p *Pod, want string) bool {
	for _, v := range p.ClusterSPIFFEIDs {
		if strings.Contains(v.Message, want) {
			return true
		}
	}
	return strings.Contains(p.Message, want)
}

func a[T any](items ...T) []T { return items }

func setNamespace(in *PodInput, ns string) {
	in.Pod.Namespace = ns
	in.Namespace.Name = ns
}

// TestOutdatedEntryDiff checks that an outdated entry names each differing field with both
// values, and keeps SPIRE's entry ID.
func TestOutdatedEntryDiff(t *testing.T) {
	in := testPod()
	in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0, func(s *spirev1alpha1.ClusterSPIFFEIDSpec) {
		s.DNSNameTemplates = []string{"web.app", "web"}
		s.TTL = metav1.Duration{Duration: time.Hour}
	}))
	current := webEntry("e1")
	current.DnsNames = []string{"web"}
	in.SPIREEntries = a(current)
	got := testExplainer(t, "").Pod(in)
	want := []RenderedEntry{{
		ClusterSPIFFEID: "sa",
		Entry: Entry{SPIFFEID: "spiffe://example.org/ns/app/sa/web", ParentID: "spiffe://example.org/spire/agent/k8s_psat/c/node-uid",
			Selectors: []string{"k8s:pod-uid:pod-uid"}, X509SVIDTTL: 3600, DNSNames: []string{"web.app", "web"}},
		State:        StateOutdated,
		SPIREEntryID: "e1",
		Diff: []FieldDiff{
			{Field: "x509SvidTtl", SPIRE: "0", Rendered: "3600"},
			{Field: "dnsNames", SPIRE: "[web]", Rendered: "[web web.app]"},
		},
	}}
	if diff := cmp.Diff(want, got.Entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// TestStaleAndForeignEntries checks that SPIRE's entries of the pod that nothing declares are
// listed as stale, duplicates included, and that entries of another entryIDPrefix are foreign.
func TestStaleAndForeignEntries(t *testing.T) {
	in := testPod()
	in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0))
	old := webEntry("mine.1")
	old.SpiffeId.Path = "/old"
	duplicate := webEntry("mine.3")
	duplicate.CreatedAt = 2
	kept := webEntry("mine.2")
	kept.CreatedAt = 1
	in.SPIREEntries = a(old, duplicate, kept, webEntry("theirs.1"))
	got := testExplainer(t, "entryIDPrefix: mine\n").Pod(in)
	if diff := cmp.Diff([]string{"sa:InSync"}, states(got)); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if got.Entries[0].SPIREEntryID != "mine.2" {
		t.Errorf("matched SPIRE entry %s, want the oldest, mine.2", got.Entries[0].SPIREEntryID)
	}
	var stale, foreign []string
	for _, e := range got.StaleSPIREEntries {
		stale = append(stale, e.ID)
	}
	for _, e := range got.ForeignSPIREEntries {
		foreign = append(foreign, e.ID)
	}
	if diff := cmp.Diff([]string{"mine.3", "mine.1"}, stale); diff != "" {
		t.Errorf("stale entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"theirs.1"}, foreign); diff != "" {
		t.Errorf("foreign entries (-want +got):\n%s", diff)
	}
}

// TestEntryOfAnotherIdentityIsStale checks that when SPIRE holds only an entry of another
// SPIFFE ID for the pod, which a sync rewrites in place, the rendered entry is missing and the
// old one is stale.
func TestEntryOfAnotherIdentityIsStale(t *testing.T) {
	in := testPod()
	in.ClusterSPIFFEIDs = a(clusterSPIFFEID("sa", 0))
	old := webEntry("e1")
	old.SpiffeId.Path = "/ns/app/sa/old"
	in.SPIREEntries = a(old)
	got := testExplainer(t, "").Pod(in)
	if diff := cmp.Diff([]string{"sa:Missing"}, states(got)); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if got.Entries[0].SPIREEntryID != "" || got.Entries[0].Diff != nil {
		t.Errorf("missing entry has SPIRE entry %q and diff %v, want neither", got.Entries[0].SPIREEntryID, got.Entries[0].Diff)
	}
	if len(got.StaleSPIREEntries) != 1 || got.StaleSPIREEntries[0].ID != "e1" {
		t.Errorf("stale entries %+v, want e1", got.StaleSPIREEntries)
	}
}

// TestPodText checks the human output of a masked entry: aligned fields, the masking winner,
// and no line ending in blanks.
func TestPodText(t *testing.T) {
	in := testPod()
	in.ClusterSPIFFEIDs = a(clusterSPIFFEID("young", 5), clusterSPIFFEID("old", 1))
	in.SPIREEntries = a(webEntry("e1"))
	var out bytes.Buffer
	if err := WritePodText(&out, testExplainer(t, "").Pod(in)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"  NAME   SELECTS  REASON    DETAIL\n  old    yes      Rendered\n  young  yes      Masked    ClusterSPIFFEID old declares the same entry",
		"    SPIRE:      in sync (entry e1)\n",
		"    SPIRE:      not written: masked by old, which declares the same entry and is older\n",
		"Summary: 1 entry in SPIRE as rendered.\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for line := range strings.Lines(text) {
		if strings.HasSuffix(line, " \n") {
			t.Errorf("line ends in blanks: %q", line)
		}
	}
}
