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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	churnPods   = 50
	churnRounds = 3
	// churnUpdaters is how many pod status updates are in flight at once.
	churnUpdaters = 8
)

// TestStatusChurnWritesNothing flaps the Ready condition of a Service's pods and moves them
// to new IPs. kube-controller-manager rewrites the EndpointSlices each time, but the pods
// keep their Service and so their entries: SPIRE's own telemetry must count no entry write,
// full resyncs included. Then new pods outside the Service get their IPs and turn Running
// and Ready: one creation each and no other write.
//
// It counts every write SPIRE makes, so it must run alone: it is the one scenario that is
// not a parallel test.
func TestStatusChurnWritesNothing(t *testing.T) {
	s := newScenario(t, "churn", true)
	ctx := t.Context()
	start := time.Now()
	s.createDeployment(s.deployment("web", churnPods))
	s.createService("web", map[string]string{"app": "web"})
	pods := s.waitRunning("app=web", churnPods)
	s.waitSliceEndpoints("web", churnPods, true)
	entries := s.logExact("the Deployment and its Service were created", start)
	if n := entriesWithDNSNames(entries); n != churnPods {
		t.Fatalf("%d entries have the Service's DNS names, want %d", n, churnPods)
	}

	before, err := s.entryWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The counters are the right ones: they counted the entries' creation.
	if created := before["spire_server_datastore_registration_entry_create"]; created < churnPods {
		t.Fatalf("SPIRE's telemetry counts %v entry creations, want at least the %d of this scenario", created, churnPods)
	}
	logOffset := s.controllerLogOffset()
	start = time.Now()
	updates := 0
	for round := 1; round <= churnRounds; round++ {
		// Ready flaps off…
		updates += s.updateStatuses(pods, func(i int, st *corev1.PodStatus) { setReady(st, corev1.ConditionFalse) })
		s.waitSliceEndpoints("web", churnPods, false)
		// …and back on, at a new IP.
		updates += s.updateStatuses(pods, func(i int, st *corev1.PodStatus) {
			setReady(st, corev1.ConditionTrue)
			ip := fmt.Sprintf("10.245.%d.%d", round, i+1)
			st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		})
		s.waitSliceEndpoints("web", churnPods, true)
	}
	churned := time.Since(start)
	// The pods did move: they and their endpoints are at the last round's addresses.
	lastRound := fmt.Sprintf("10.245.%d.", churnRounds)
	for _, addr := range s.sliceAddresses("web") {
		if !strings.HasPrefix(addr, lastRound) {
			t.Fatalf("endpoint address %s after the churn, want one of %s0/24", addr, lastRound)
		}
	}
	// Let full resyncs run over the churned state too.
	time.Sleep(2*gcInterval + time.Second)
	after, err := s.entryWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writes := 0.0
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if d := after[name] - before[name]; d != 0 {
			writes += d
			t.Errorf("SPIRE counted %v more %s during status churn, want none", d, name)
		}
	}
	s.logWritesOnFailure(logOffset)
	t.Logf("%d pod status updates in %d rounds over %s (Ready flapping, new IPs; EndpointSlices rewritten each round), then %s of full resyncs: %v SPIRE entry writes",
		updates, churnRounds, churned.Round(time.Millisecond), (2*gcInterval + time.Second), writes)
	entries = s.logExact("the churn and its full resyncs", time.Now())
	if n := entriesWithDNSNames(entries); n != churnPods {
		t.Errorf("%d entries have the Service's DNS names after the churn, want %d", n, churnPods)
	}

	// New pods outside the Service go from scheduled to Running and Ready with an IP: one
	// entry created each, and not one written again.
	before = after
	logOffset = s.controllerLogOffset()
	// The probe counts the pods kube-controller-manager makes and deletes, however many.
	p, stopProbe := s.startProbe()
	start = time.Now()
	s.createDeployment(s.deployment("worker", churnPods))
	s.waitRunning("app=worker", churnPods)
	s.logExact("a second Deployment was created", start)
	time.Sleep(gcInterval + time.Second)
	if after, err = s.entryWrites(ctx); err != nil {
		t.Fatal(err)
	}
	stopProbe()
	// The probe saw the first Deployment's pods too, scheduled long before.
	for _, pod := range pods {
		delete(p.scheduled, string(pod.UID))
	}
	scheduled, deleted := len(p.scheduled), len(p.deleted)
	const createRPC, deleteRPC = "spire_server_rpc_entry_v1_entry_batch_create_entry", "spire_server_rpc_entry_v1_entry_batch_delete_entry"
	want := maps.Clone(before)
	want["spire_server_datastore_registration_entry_create"] += float64(scheduled)
	want["spire_server_datastore_registration_entry_delete"] += float64(deleted)
	// However the controllers batch their writes, they send some.
	if after[createRPC] == before[createRPC] {
		t.Errorf("SPIRE counted no %s", createRPC)
	}
	want[createRPC] = after[createRPC]
	if deleted > 0 {
		want[deleteRPC] = after[deleteRPC]
	}
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("SPIRE's entry write counters after %d new pods were scheduled and %d deleted (-want +got):\n%s", scheduled, deleted, diff)
	}
	s.logWritesOnFailure(logOffset)
	t.Logf("%d new pods scheduled (%d deleted), then Running and Ready with IPs: %v entries created in %v BatchCreateEntry calls, %v updated, %v deleted",
		scheduled, deleted, after["spire_server_datastore_registration_entry_create"]-before["spire_server_datastore_registration_entry_create"],
		after["spire_server_rpc_entry_v1_entry_batch_create_entry"]-before["spire_server_rpc_entry_v1_entry_batch_create_entry"],
		after["spire_server_datastore_registration_entry_update"]-before["spire_server_datastore_registration_entry_update"],
		after["spire_server_datastore_registration_entry_delete"]-before["spire_server_datastore_registration_entry_delete"])
}

// logWritesOnFailure logs the writes the controllers announced since offset, if the test
// has failed.
func (s *scenario) logWritesOnFailure(offset int64) {
	if !s.t.Failed() {
		return
	}
	for _, line := range s.writesLoggedSince(offset) {
		s.t.Log(line)
	}
}

// setReady sets the pod's Ready and ContainersReady conditions.
func setReady(st *corev1.PodStatus, status corev1.ConditionStatus) {
	now := metav1.Now()
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.LastTransitionTime = status, now
		}
	}
	for i := range st.ContainerStatuses {
		st.ContainerStatuses[i].Ready = status == corev1.ConditionTrue
	}
}

// updateStatuses applies mutate to every pod's status, a few pods at a time, and returns
// the number of updates.
func (s *scenario) updateStatuses(pods []corev1.Pod, mutate func(i int, st *corev1.PodStatus)) int {
	s.t.Helper()
	errs := make([]error, len(pods))
	limit := make(chan struct{}, churnUpdaters)
	var wg sync.WaitGroup
	for i := range pods {
		limit <- struct{}{}
		wg.Go(func() {
			defer func() { <-limit }()
			_, errs[i] = realcluster.UpdatePodStatus(s.t.Context(), s.client, s.ns, pods[i].Name, func(st *corev1.PodStatus) { mutate(i, st) })
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.t.Fatal(err)
	}
	return len(pods)
}

// createService creates a Service selecting the pods with these labels.
func (s *scenario) createService(name string, selector map[string]string) {
	s.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	if _, err := s.client.CoreV1().Services(s.ns).Create(s.t.Context(), svc, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// waitSliceEndpoints waits until the Service's EndpointSlices hold exactly want pod
// endpoints, all ready or all not ready, and returns how many slices there are.
func (s *scenario) waitSliceEndpoints(service string, want int, ready bool) int {
	s.t.Helper()
	var last string
	var nSlices int
	err := wait.PollUntilContextTimeout(s.t.Context(), podsPoll, podsTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := s.client.DiscoveryV1().EndpointSlices(s.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		total, matching := 0, 0
		for _, sl := range list.Items {
			for _, ep := range sl.Endpoints {
				total++
				if (ep.Conditions.Ready != nil && *ep.Conditions.Ready) == ready {
					matching++
				}
			}
		}
		nSlices = len(list.Items)
		last = fmt.Sprintf("%d slices, %d endpoints, %d with ready=%v", nSlices, total, matching, ready)
		return total == want && matching == want, nil
	})
	if err != nil {
		s.t.Fatalf("wait for %d endpoints with ready=%v in the slices of %s (last: %s): %v", want, ready, service, last, err)
	}
	return nSlices
}

// sliceAddresses returns the addresses of every endpoint in the Service's EndpointSlices.
func (s *scenario) sliceAddresses(service string) []string {
	s.t.Helper()
	list, err := s.client.DiscoveryV1().EndpointSlices(s.ns).List(s.t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		s.t.Fatal(err)
	}
	var addrs []string
	for _, sl := range list.Items {
		for _, ep := range sl.Endpoints {
			addrs = append(addrs, ep.Addresses...)
		}
	}
	return addrs
}
