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

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// haLeaseDuration is short so that the test measures takeover, not waiting.
const haLeaseDuration = 4 * time.Second

// haReplica is one pod of a SPIRE deployment as the chart makes it: a spire-server and its
// spire-registrar sidecar, which talks to that server's socket only.
type haReplica struct {
	name  string
	spire *realcluster.SPIRE
	*replica
}

// startHAReplica starts spire-registrar as the sidecar of server, under the Lease every
// replica shares.
func startHAReplica(t *testing.T, bin, kubeconfig, name string, server *realcluster.SPIRE) *haReplica {
	t.Helper()
	config := writeFile(t, fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: example.org
clusterName: ha
spireServerSocketPath: %s
leaderElection:
  leaderElect: true
  resourceName: spire-registrar-ha
  resourceNamespace: default
  leaseDuration: %s
  renewDeadline: 3s
  retryPeriod: 500ms
`, server.SocketPath(), haLeaseDuration))
	r := startReplica(t, bin, kubeconfig, config)
	return &haReplica{name: name, spire: server, replica: r}
}

// TestHA runs SPIRE as production does: two spire-servers on one PostgreSQL database, each
// with spire-registrar as its leader-elected sidecar. It kills the leader's SPIRE server, then
// the leader; the other replica takes over, and through pod creations and deletions every pod
// keeps exactly its entry: none lost, none duplicated. It logs how long the takeover took.
func TestHA(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL, the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	pg := realcluster.NewPostgres(t, realcluster.PostgresOptions{})
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SPIRE: realcluster.SPIREOptions{Postgres: pg}})
	client := stack.Client
	servers := []*realcluster.SPIRE{stack.SPIRE,
		realcluster.NewSPIRE(t, realcluster.SPIREOptions{PostgresConnectionString: stack.SPIRE.PostgresConnectionString()})}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const nodes, podsPerNode = 4, 50
	for n := range nodes {
		if _, err := realcluster.CreateNode(ctx, client, fmt.Sprintf("node-%d", n)); err != nil {
			t.Fatal(err)
		}
	}
	createPods := func(prefix string, count int) {
		t.Helper()
		for i := range count {
			if _, err := realcluster.CreatePod(ctx, client, "default", fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("node-%d", i%nodes)); err != nil {
				t.Fatal(err)
			}
		}
	}
	createPods("before", nodes*podsPerNode)
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	replicas := []*haReplica{
		startHAReplica(t, bin, stack.Kube.Kubeconfig(), "replica-0", servers[0]),
		startHAReplica(t, bin, stack.Kube.Kubeconfig(), "replica-1", servers[1]),
	}
	poll := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	// Either server shows the shared datastore; before the kill ask the first, after it the
	// survivor.
	converged := func(server *realcluster.SPIRE) func() bool {
		return func() bool { return entriesDiff(ctx, t, client, server) == "" }
	}
	poll("every pod to have exactly its entry", 2*time.Minute, converged(servers[0]))

	var leader, standby *haReplica
	poll("one leader", 10*time.Second, func() bool { return replicas[0].resyncs() > 0 || replicas[1].resyncs() > 0 })
	if replicas[0].resyncs() > 0 {
		leader, standby = replicas[0], replicas[1]
	} else {
		leader, standby = replicas[1], replicas[0]
	}
	if standby.resyncs() != 0 {
		t.Fatalf("both replicas ran resyncs: two writers")
	}
	t.Logf("%s leads, %s stands by", leader.name, standby.name)
	// The standby has had time to warm up and must not have written to SPIRE.
	time.Sleep(time.Second)
	if writes := spireWrites(standby.replica); writes != 0 {
		t.Errorf("the standby wrote to SPIRE %d times", writes)
	}

	// The leader's SPIRE server dies first: the leader keeps its lease but cannot write.
	leader.spire.Kill()
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// Wait for it to be gone, and leave its exit for the cleanup.
	leader.exited <- <-leader.exited
	createPods("after", 20)
	for i := range 30 {
		if err := client.CoreV1().Pods("default").Delete(ctx, fmt.Sprintf("before-%d", i), *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
	}
	poll("the standby to take over and run its first full resync", 3*haLeaseDuration+10*time.Second, func() bool {
		return standby.resyncs() > 0
	})
	poll("every pod, old and new, to have exactly its entry on the surviving server", 2*time.Minute, converged(standby.spire))
	converge := time.Since(killed)
	leading := logTime(t, standby.logs.String(), "Became leader", killed).Sub(killed)
	resynced := unixTime(t, metricValue(standby.replica, `spire_registrar_last_full_resync_timestamp_seconds{controller="spire-registrar-entry-controller"}`)).Sub(killed)
	t.Logf("takeover (lease %v, renew 3s, retry 500ms): leader killed → lease taken %v → first full resync done %v (it took %ss) → every pod's entry seen right %v",
		haLeaseDuration, leading.Round(time.Millisecond), resynced.Round(time.Millisecond),
		metricValue(standby.replica, `spire_registrar_last_full_resync_duration_seconds{controller="spire-registrar-entry-controller"}`),
		converge.Round(time.Millisecond))
	if line := logLine(standby.logs.String(), "Informer caches synced"); line != "" {
		t.Logf("the standby had synced its informers before the takeover: %s", line[strings.Index(line, "]")+2:])
	}
	// Steady afterwards: a pod created now gets its entry from the new leader alone.
	start := time.Now()
	createPods("later", 1)
	poll("the new leader to register a new pod", 30*time.Second, converged(standby.spire))
	t.Logf("a pod created after the takeover got its entry in %v", time.Since(start).Round(time.Millisecond))
}

// entriesDiff compares SPIRE's entries with the pods: every pod has exactly one entry, for its
// name and selecting its UID, and there is nothing else. It returns "" when they agree.
func entriesDiff(ctx context.Context, t *testing.T, client kubernetes.Interface, server *realcluster.SPIRE) string {
	t.Helper()
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range pods.Items {
		want = append(want, fmt.Sprintf("spiffe://example.org/pod/%s k8s:pod-uid:%s", p.Name, p.UID))
	}
	entries, err := server.EntryShow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		uid := "none"
		for _, s := range e.Selectors {
			if s.Type == "k8s" && strings.HasPrefix(s.Value, "pod-uid:") {
				uid = s.String()
			}
		}
		got = append(got, e.SPIFFEID+" "+uid)
	}
	slices.Sort(want)
	slices.Sort(got)
	return cmp.Diff(want, got)
}

// metricValue is the value of the sample that the replica serves under this name and labels,
// or "".
func metricValue(r *replica, sample string) string {
	_, body := get(r.metrics + "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if value, ok := strings.CutPrefix(line, sample+" "); ok {
			return value
		}
	}
	return ""
}

// unixTime parses a Prometheus timestamp in seconds.
func unixTime(t *testing.T, value string) time.Time {
	t.Helper()
	seconds, err := strconv.ParseFloat(value, 64)
	if err != nil {
		t.Fatalf("timestamp %q: %v", value, err)
	}
	return time.Unix(0, int64(seconds*float64(time.Second)))
}

// logTime is when the first klog line after since that contains message was written, read
// from its header ("I1123 17:45:01.123456 ...", local time, no year).
func logTime(t *testing.T, logs, message string, since time.Time) time.Time {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, message) || len(line) < 21 {
			continue
		}
		at, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
		if err != nil {
			t.Fatalf("klog header of %q: %v", line, err)
		}
		at = at.AddDate(since.Year(), 0, 0)
		if at.After(since) {
			return at
		}
	}
	t.Fatalf("no log line %q after %v", message, since)
	return time.Time{}
}

// logLine is the first line of logs that contains message, or "".
func logLine(logs, message string) string {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, message) {
			return line
		}
	}
	return ""
}

// spireWrites is how many SPIRE requests other than reads the replica made.
func spireWrites(r *replica) int {
	_, body := get(r.metrics + "/metrics")
	n := 0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "spire_registrar_spire_requests_total{") {
			continue
		}
		if strings.Contains(line, `method="List`) || strings.Contains(line, `method="Get`) {
			continue
		}
		var v int
		_, _ = fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%d", &v)
		n += v
	}
	return n
}
