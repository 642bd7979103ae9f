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

package scenarios

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// convergeTimeout bounds how long SPIRE may take to hold exactly what the pods declare.
	convergeTimeout = 2 * time.Minute
	convergePoll    = 200 * time.Millisecond
	podUIDSelector  = "k8s:pod-uid:"
)

// entry is what the scenarios compare of a registration entry: every field the
// ClusterSPIFFEIDs of the scenarios determine.
type entry struct {
	SPIFFEID      string
	ParentID      string
	Selectors     []string // sorted: SPIRE keeps a set
	DNSNames      []string // in order: the first is the SVID's common name
	FederatesWith []string
	Admin         bool
	Downstream    bool
	Hint          string
}

func (e entry) key() string { return e.SPIFFEID + " " + strings.Join(e.Selectors, ",") }

func sortEntries(entries []entry) []entry {
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key(), b.key()) })
	return entries
}

// fromAPI converts an entry as SPIRE's API returns it.
func fromAPI(e *types.Entry) entry {
	id := func(id *types.SPIFFEID) string {
		if id == nil {
			return ""
		}
		return "spiffe://" + id.GetTrustDomain() + id.GetPath()
	}
	out := entry{SPIFFEID: id(e.GetSpiffeId()), ParentID: id(e.GetParentId()), DNSNames: nilIfEmpty(e.GetDnsNames()),
		FederatesWith: sortedOrNil(e.GetFederatesWith()), Admin: e.GetAdmin(), Downstream: e.GetDownstream(), Hint: e.GetHint()}
	for _, s := range e.GetSelectors() {
		out.Selectors = append(out.Selectors, s.GetType()+":"+s.GetValue())
	}
	out.Selectors = sortedOrNil(out.Selectors)
	return out
}

// fromCLI converts an entry as `spire-server entry show` prints it.
func fromCLI(e realcluster.Entry) entry {
	out := entry{SPIFFEID: e.SPIFFEID, ParentID: e.ParentID, DNSNames: nilIfEmpty(e.DNSNames), FederatesWith: sortedOrNil(e.FederatesWith),
		Admin: e.Admin, Downstream: e.Downstream, Hint: e.Hint}
	for _, s := range e.Selectors {
		out.Selectors = append(out.Selectors, s.String())
	}
	out.Selectors = sortedOrNil(out.Selectors)
	return out
}

// nilIfEmpty makes an empty list compare equal to none.
func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func sortedOrNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// podDeclaresEntry is the rule users are promised: a pod has its entry from the moment it is
// scheduled until it has finished (Succeeded or Failed) or is deleted.
func podDeclaresEntry(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// serviceDNSNames are the names a pod gets from a Service with autoPopulateDNSNames, in
// the order spire-registrar writes them (sorted).
func serviceDNSNames(services []string, ns string) []string {
	var names []string
	for _, svc := range services {
		names = append(names, svc, svc+"."+ns, svc+"."+ns+".svc", svc+"."+ns+".svc."+clusterDomain)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// expectedEntries is what SPIRE must hold for a scenario's namespace: one entry for each
// pod there that declares one, rendered from the scenario's ClusterSPIFFEID by hand.
func (w *world) expectedEntries(ctx context.Context, ns string, dns bool) ([]entry, error) {
	nodes, err := w.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nodeUIDs := map[string]string{}
	for _, n := range nodes.Items {
		nodeUIDs[n.Name] = string(n.UID)
	}
	pods, err := w.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	servicesOf := map[string][]string{} // pod name → Services whose slices target it
	if dns {
		slicesList, err := w.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, s := range slicesList.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
					servicesOf[ep.TargetRef.Name] = append(servicesOf[ep.TargetRef.Name], s.Labels[discoveryv1.LabelServiceName])
				}
			}
		}
	}
	var want []entry
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !podDeclaresEntry(pod) {
			continue
		}
		// A pod whose node is gone has no agent to be issued to: it declares nothing
		// while it waits for the pod garbage collector, as with spire-controller-manager.
		nodeUID, ok := nodeUIDs[pod.Spec.NodeName]
		if !ok {
			continue
		}
		e := entry{
			SPIFFEID:  fmt.Sprintf("spiffe://%s/ns/%s/sa/%s", trustDomain, ns, pod.Spec.ServiceAccountName),
			ParentID:  fmt.Sprintf("spiffe://%s/spire/agent/k8s_psat/%s/%s", trustDomain, clusterName, nodeUID),
			Selectors: []string{podUIDSelector + string(pod.UID)},
		}
		if services := servicesOf[pod.Name]; len(services) > 0 {
			slices.Sort(services)
			e.DNSNames = serviceDNSNames(slices.Compact(services), ns)
		}
		want = append(want, e)
	}
	return sortEntries(want), nil
}

// namespacePrefix is how every SPIFFE ID of a scenario's namespace begins.
func namespacePrefix(ns string) string { return fmt.Sprintf("spiffe://%s/ns/%s/", trustDomain, ns) }

// ofNamespace picks the entries of a scenario's namespace and those of no scenario at all,
// which nothing may leave behind.
func ofNamespace(all []entry, ns string, active map[string]bool) []entry {
	var picked []entry
	for _, e := range all {
		if strings.HasPrefix(e.SPIFFEID, namespacePrefix(ns)) {
			picked = append(picked, e)
			continue
		}
		stray := true
		for other := range active {
			stray = stray && !strings.HasPrefix(e.SPIFFEID, namespacePrefix(other))
		}
		if stray {
			picked = append(picked, e)
		}
	}
	return sortEntries(picked)
}

// spireEntries lists every entry through SPIRE's API.
func (w *world) spireEntries(ctx context.Context) ([]*types.Entry, error) {
	var all []*types.Entry
	token := ""
	for {
		resp, err := w.entries.ListEntries(ctx, &entryv1.ListEntriesRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, err
		}
		all = append(all, resp.GetEntries()...)
		if token = resp.GetNextPageToken(); token == "" {
			return all, nil
		}
	}
}

// diffSPIRE compares the entries SPIRE holds, through its API, for a scenario's namespace
// and for no scenario's with what the namespace's pods declare.
func (w *world) diffSPIRE(ctx context.Context, ns string) (string, []entry, error) {
	active := w.activeNamespaces()
	want, err := w.expectedEntries(ctx, ns, active[ns])
	if err != nil {
		return "", nil, err
	}
	list, err := w.spireEntries(ctx)
	if err != nil {
		return "", nil, err
	}
	all := make([]entry, 0, len(list))
	for _, e := range list {
		all = append(all, fromAPI(e))
	}
	return cmp.Diff(want, ofNamespace(all, ns, active), cmpopts.EquateEmpty()), want, nil
}

// waitExact waits until SPIRE holds exactly one entry for each pod of the namespace that
// declares one, with the right fields, and no entry outside the scenarios' namespaces; then
// SPIRE's CLI must agree. It returns the time it waited and the entries.
func (w *world) waitExact(t *testing.T, ns, what string) (time.Duration, []entry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), convergeTimeout)
	defer cancel()
	start := time.Now()
	var diff string
	var want []entry
	var err error
	for {
		diff, want, err = w.diffSPIRE(ctx, ns)
		if err == nil && diff == "" {
			break
		}
		select {
		case <-ctx.Done():
			if err != nil {
				t.Fatalf("%s: SPIRE never held exactly the pods' entries (last error: %v)", what, err)
			}
			t.Fatalf("%s: SPIRE never held exactly the pods' entries; last (-want +got):\n%s", what, diff)
		case <-time.After(convergePoll):
		}
	}
	waited := time.Since(start)
	// SPIRE's own CLI is the independent oracle.
	shown, err := w.spire.EntryShow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]entry, 0, len(shown))
	for _, e := range shown {
		all = append(all, fromCLI(e))
	}
	if diff := cmp.Diff(want, ofNamespace(all, ns, w.activeNamespaces()), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s: spire-server entry show disagrees with the pods (-want +got):\n%s", what, diff)
	}
	return waited, want
}

// entriesWithDNSNames counts the entries that have DNS names.
func entriesWithDNSNames(entries []entry) int {
	n := 0
	for _, e := range entries {
		if len(e.DNSNames) > 0 {
			n++
		}
	}
	return n
}
