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

package manifests_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// What the official Helm chart sets for release spire in namespace spire-server, as
// testdata/chart holds it.
const (
	chartClassName   = "spire-server-spire"
	chartEntryPrefix = "example-cluster"
	// chartLease is the chart's leaderElection.resourceName: the first 8 hex digits of
	// sha256("spire-server-spire"), then .spiffe.io.
	chartLease = "6f304bd2.spiffe.io"
	// chartServerAddress is the chart's server Service as tcp-mtls/config.yaml names it.
	chartServerAddress = "spire-server.spire-server.svc:443"
	// csiWorkloadAPISocket is where tcp-mtls/deployment.yaml mounts the agent's socket.
	csiWorkloadAPISocket = "/spiffe-workload-api/spire-agent.sock"
)

// chartClusterSPIFFEIDs are the ClusterSPIFFEIDs in testdata/chart.
var chartClusterSPIFFEIDs = []string{
	"spire-server-spire-default",
	"spire-server-spire-oidc-discovery-provider",
	"spire-server-spire-test-keys",
}

func readTestdata(t *testing.T, elem ...string) string {
	t.Helper()
	data, err := os.ReadFile(repoPath(append([]string{"test", "manifests", "testdata"}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func yamlMap(t *testing.T, text string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// carryOver makes the chart's config file spire-registrar's over TCP with SPIFFE mTLS, with
// exactly the edits manifests/README.md lists: SPIRE is reached at an address instead of the
// admin socket, and the chart's Lease and webhook stay the chart's container's.
func carryOver(chart map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range chart {
		out[k] = v
	}
	delete(out, "spireServerSocketPath")
	delete(out, "leaderElection")
	delete(out, "validatingWebhookConfigurationName")
	out["spireServerAddress"] = chartServerAddress
	out["workloadAPISocketPath"] = csiWorkloadAPISocket
	return out
}

// TestTCPMTLSFromChart renders the kustomization manifests/README.md has an operator write to
// move a chart install to the TCP-mTLS topology (testdata/tcp-mtls-from-chart): the topology's
// objects but no CRD, since the chart's own stay, and the chart's config file carried over
// with only the edits the README names, so that className, entryIDPrefix, ignoreNamespaces and
// every other field that decides which entries exist mean what they meant.
func TestTCPMTLSFromChart(t *testing.T) {
	objs := kustomize(t, "test", "manifests", "testdata", "tcp-mtls-from-chart")
	want := slices.DeleteFunc(slices.Clone(deploymentTopologyObjects), func(s string) bool {
		return strings.HasPrefix(s, "CustomResourceDefinition ")
	})
	if got := ids(objs); !slices.Equal(got, want) {
		t.Fatalf("the migration's kustomization renders\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	chart := yamlMap(t, readTestdata(t, "chart", "controller-manager-config.yaml"))
	carried := readTestdata(t, "tcp-mtls-from-chart", "config.yaml")
	if diff := cmp.Diff(carryOver(chart), yamlMap(t, carried)); diff != "" {
		t.Errorf("tcp-mtls-from-chart/config.yaml is not the chart's with the README's edits (-want +got):\n%s", diff)
	}
	cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "spire-registrar"))
	if cm.Data["config.yaml"] != carried {
		t.Errorf("the ConfigMap does not hold the carried-over config:\n%s", cm.Data["config.yaml"])
	}
	cfg, err := config.Parse([]byte(carried))
	if err != nil {
		t.Fatalf("spire-registrar refuses the carried-over config: %v", err)
	}
	if cfg.ClassName != chartClassName || cfg.EntryIDPrefix != chartEntryPrefix {
		t.Errorf("className %q entryIDPrefix %q, want the chart's %q and %q", cfg.ClassName, cfg.EntryIDPrefix, chartClassName, chartEntryPrefix)
	}
	if want := []string{"kube-system", "kube-public", "local-path-storage", "openshift-.*", "ibm-.*"}; !slices.Equal(cfg.IgnoreNamespaces, want) {
		t.Errorf("ignoreNamespaces %q, want the chart's %q", cfg.IgnoreNamespaces, want)
	}
	if cfg.SPIREServerAddress != chartServerAddress || cfg.SPIREServerSocketPath != "" {
		t.Errorf("SPIRE at address %q socket %q, want %s only", cfg.SPIREServerAddress, cfg.SPIREServerSocketPath, chartServerAddress)
	}
	// The Deployment's --leader-elect=true takes the Lease rbac/'s Role lets it renew, not the
	// chart's, which the chart's container keeps holding.
	if cfg.LeaderElection.ResourceName != leaseName {
		t.Errorf("Lease %q, want %q, the one manifests/rbac lets it renew", cfg.LeaderElection.ResourceName, leaseName)
	}
	if cfg.ValidatingWebhookConfigurationName != "" {
		t.Errorf("serves the webhook %q, which the chart's container keeps serving", cfg.ValidatingWebhookConfigurationName)
	}

	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "spire-registrar"))
	checkRegistrarContainer(t, objs, &d.Spec.Template.Spec, &d.Spec.Template.Spec.Containers[0], "healthz")

	// Step 3's patch makes the same Deployment a dry run, and changes nothing else.
	dry := kustomize(t, "test", "manifests", "testdata", "tcp-mtls-from-chart-dry-run")
	if got := ids(dry); !slices.Equal(got, want) {
		t.Fatalf("the dry run's kustomization renders\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	dryDeployment := typed[appsv1.Deployment](t, find(t, dry, "Deployment", "spire-registrar"))
	dryArgs := &dryDeployment.Spec.Template.Spec.Containers[0].Args
	if n := len(*dryArgs); n == 0 || (*dryArgs)[n-1] != "--dry-run" {
		t.Errorf("dry run's args %q, want --dry-run added", *dryArgs)
	} else {
		*dryArgs = (*dryArgs)[:n-1]
	}
	if diff := cmp.Diff(d, dryDeployment); diff != "" {
		t.Errorf("the dry-run patch changed more than the args (-step 5 +step 3):\n%s", diff)
	}
}

// spireEntryWrite matches SPIRE's counters of entry writes: the API's batch calls and, below
// them, the datastore's per-entry operations.
var spireEntryWrite = regexp.MustCompile(`^spire_server_(rpc_entry_v1_entry_batch_(create|update|delete)_entry|datastore_registration_entry_(create|update|delete))$`)

// spireEntryWrites reads SPIRE's telemetry and sums each entry-write counter over its labels.
func spireEntryWrites(ctx context.Context, s *realcluster.SPIRE) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.MetricsURL(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("SPIRE metrics: %s", resp.Status)
	}
	counts := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line+" ", "{ ")]
		if !spireEntryWrite.MatchString(name) {
			continue
		}
		fields := strings.Fields(line[strings.LastIndexByte(line, ' '):])
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("SPIRE metric line %q: %w", line, err)
		}
		counts[name] += v
	}
	return counts, sc.Err()
}

// sortedEntries lists SPIRE's entries through its CLI, by ID.
func sortedEntries(ctx context.Context, t *testing.T, s *realcluster.SPIRE) []realcluster.Entry {
	t.Helper()
	entries, err := s.EntryShow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(entries, func(a, b realcluster.Entry) int { return strings.Compare(a.ID, b.ID) })
	return entries
}

// podEntry is the chart's entry for a pod of ServiceAccount default: what it must look like.
type podEntry struct {
	spiffeID string
	dnsNames []string
	hint     string
}

// checkPodEntries checks that SPIRE holds exactly one entry per pod, as want says, under the
// chart's prefix and parented to the pod's node's agent, and nothing else of the chart's.
func checkPodEntries(entries []realcluster.Entry, nodeUID string, want map[string]podEntry) error {
	byPod := map[string]realcluster.Entry{}
	for _, e := range entries {
		if !strings.HasPrefix(e.ID, chartEntryPrefix+".") {
			continue // the admin entry, made with the CLI
		}
		if len(e.Selectors) != 1 || e.Selectors[0].Type != "k8s" || !strings.HasPrefix(e.Selectors[0].Value, "pod-uid:") {
			return fmt.Errorf("entry %s has selectors %v, want one k8s:pod-uid", e.ID, e.Selectors)
		}
		uid := strings.TrimPrefix(e.Selectors[0].Value, "pod-uid:")
		if _, dup := byPod[uid]; dup {
			return fmt.Errorf("two entries for pod %s", uid)
		}
		byPod[uid] = e
	}
	if len(byPod) != len(want) {
		return fmt.Errorf("%d pods have entries under %s., want %d", len(byPod), chartEntryPrefix, len(want))
	}
	parent := "spiffe://example.org/spire/agent/k8s_psat/" + chartEntryPrefix + "/" + nodeUID
	for uid, w := range want {
		e, ok := byPod[uid]
		if !ok {
			return fmt.Errorf("no entry for pod %s", uid)
		}
		if e.SPIFFEID != w.spiffeID || e.ParentID != parent || e.Hint != w.hint || !slices.Equal(e.DNSNames, w.dnsNames) {
			return fmt.Errorf("entry of pod %s is %+v, want %s under %s, hint %q, DNS names %v", uid, e, w.spiffeID, parent, w.hint, w.dnsNames)
		}
	}
	return nil
}

// resyncsDone reports whether a registrar's metrics count n successful full resyncs of each
// of its entry and federation controllers.
func resyncsDone(ctx context.Context, r *realcluster.Registrar, n int) bool {
	series, err := r.Scrape(ctx)
	if err != nil {
		return false
	}
	done := 0
	for s, v := range series {
		if strings.HasPrefix(s, "spire_registrar_full_resyncs_total{") && strings.Contains(s, `result="success"`) && v >= float64(n) {
			done++
		}
	}
	return done >= 2
}

func waitResyncs(ctx context.Context, t *testing.T, r *realcluster.Registrar, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-r.Done():
			return false, fmt.Errorf("spire-registrar exited: %v", r.Err())
		default:
		}
		return resyncsDone(ctx, r, n), nil
	})
	if err != nil {
		t.Fatalf("waiting for %d full resyncs of each controller: %v", n, err)
	}
}

func leaseHolder(ctx context.Context, client kubernetes.Interface, name string) string {
	lease, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// TestMigrateChartToTCPMTLS follows manifests/README.md's migration from an official Helm
// chart install to the TCP-mTLS topology on real binaries, and checks that it loses no entry.
//
// Start: spire-controller-manager v0.7.0 with the chart's config file and ClusterSPIFFEIDs
// (testdata/chart) holds the entries of two workload pods and of an OIDC discovery provider pod
// in the chart's own namespace, which only the chart's ignoreNamespaces leaves registered.
// Then the README's steps: spire-registrar's admin entry; a dry run of spire-registrar over
// TCP-mTLS with the carried-over config (testdata/tcp-mtls-from-chart) beside the running
// spire-controller-manager, which must plan no write; the chart upgraded with its
// controllerManager.reconcile turned off, modelled by restarting spire-controller-manager with
// the config the chart then renders (it keeps running, holding the chart's Lease and writing
// nothing); and spire-registrar over TCP-mTLS. SPIRE must keep every entry field for field,
// IDs and revision numbers included, and count no write until a pod created afterwards gets
// its entry from spire-registrar.
//
// Outside a cluster, the agent attests spire-registrar by uid and executable rather than by
// namespace and ServiceAccount, and the carried-over config gets the harness's SPIRE address,
// agent socket, clusterDomain and Lease namespace, which a pod would get from its cluster.
func TestMigrateChartToTCPMTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver, spire-server, spire-agent and spire-controller-manager")
	}
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{SCMCRDs: true})
	agent := realcluster.NewAgent(t, realcluster.AgentOptions{Server: stack.SPIRE, DiscoverWorkloadPath: true})
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	client := stack.Client

	// The cluster as the chart left it: its namespaces, its ClusterSPIFFEIDs, workloads.
	for _, ns := range []string{namespace, "spire-system", "apps"} {
		if err := realcluster.EnsureNamespace(ctx, client, ns); err != nil {
			t.Fatal(err)
		}
	}
	crs, err := render(repoPath("test", "manifests", "testdata", "chart"))
	if err != nil {
		t.Fatal(err)
	}
	if err := serverSideApply(ctx, stack.Kube.RESTConfig(), crs); err != nil {
		t.Fatal(err)
	}
	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	runningPod := func(ns, name string, labels map[string]string) *corev1.Pod {
		t.Helper()
		if _, err := realcluster.CreatePod(ctx, client, ns, name, node.Name, func(p *corev1.Pod) { p.Labels = labels }); err != nil {
			t.Fatal(err)
		}
		pod, err := realcluster.SetPodPhase(ctx, client, ns, name, corev1.PodRunning)
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}
	workload := podEntry{spiffeID: "spiffe://example.org/ns/apps/sa/default", hint: "default"}
	want := map[string]podEntry{}
	for _, name := range []string{"web-0", "web-1"} {
		want[string(runningPod("apps", name, map[string]string{"app": "web"}).UID)] = workload
	}
	oidc := runningPod(namespace, "spire-spiffe-oidc-discovery-provider-0",
		map[string]string{"component": "oidc-discovery-provider", "release": "spire", "release-namespace": namespace})
	want[string(oidc.UID)] = podEntry{spiffeID: "spiffe://example.org/ns/spire-server/sa/default",
		hint: "oidc-discovery-provider", dnsNames: []string{"oidc-discovery.example.org"}}

	// spire-controller-manager as the chart runs it: its config file with this machine's
	// socket, and health and metrics on free loopback ports.
	chartConfig := readTestdata(t, "chart", "controller-manager-config.yaml")
	const (
		reconcileAll  = "reconcile:\n  clusterSPIFFEIDs: true\n  clusterStaticEntries: true\n  clusterFederatedTrustDomains: true\n"
		reconcileNone = "reconcile:\n  clusterSPIFFEIDs: false\n  clusterStaticEntries: false\n  clusterFederatedTrustDomains: false\n"
	)
	// scmConfig is the chart's config file as the chart renders it with these reconcile
	// settings, on this machine.
	scmConfig := func(reconcile string) []byte {
		t.Helper()
		conf := chartConfig
		for old, replacement := range map[string]string{
			"metrics:\n  bindAddress: 0.0.0.0:8082\nhealth:\n  healthProbeBindAddress: 0.0.0.0:8083\n": "",
			`spireServerSocketPath: "/tmp/spire-server/private/api.sock"`:                              "spireServerSocketPath: " + stack.SPIRE.SocketPath(),
			reconcileAll: reconcile,
		} {
			if !strings.Contains(conf, old) {
				t.Fatalf("the chart's config has no %q", old)
			}
			conf = strings.Replace(conf, old, replacement, 1)
		}
		return []byte(conf)
	}
	scm := realcluster.NewSCM(t, realcluster.SCMOptions{Kubeconfig: stack.Kube.Kubeconfig(), SPIRE: stack.SPIRE,
		ConfigYAML: scmConfig(reconcileAll), Dir: t.TempDir()})
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := stack.SPIRE.EntryShow(ctx)
		if err != nil {
			return false, nil
		}
		last = checkPodEntries(entries, string(node.UID), want)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("spire-controller-manager with the chart's config: %v (last: %v)", err, last)
	}
	scmHolder := leaseHolder(ctx, client, chartLease)
	if scmHolder == "" {
		t.Fatalf("spire-controller-manager holds no Lease %s/%s", namespace, chartLease)
	}

	// Step: spire-registrar's admin entry, made with the CLI, so its ID carries no prefix and
	// neither controller owns it.
	registrarID := "spiffe://example.org/ns/" + namespace + "/sa/spire-registrar"
	uid := strconv.Itoa(os.Getuid())
	if _, err := agent.CreateWorkloadEntryCLI(ctx, registrarID, []string{"unix:uid:" + uid, "unix:path:" + bin}, "-admin"); err != nil {
		t.Fatal(err)
	}
	if err := agent.WaitForSVIDCached(ctx, registrarID); err != nil {
		t.Fatal(err)
	}
	// spire-controller-manager writes nothing more at steady state: wait for a gcInterval of
	// quiet, then take what the migration must keep.
	before := sortedEntries(ctx, t, stack.SPIRE)
	writesBefore, err := spireEntryWrites(ctx, stack.SPIRE)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(12 * time.Second)
	if again, _ := spireEntryWrites(ctx, stack.SPIRE); !cmp.Equal(again, writesBefore) {
		t.Fatalf("spire-controller-manager still writes at steady state: %v, then %v", writesBefore, again)
	}
	if diff := cmp.Diff(before, sortedEntries(ctx, t, stack.SPIRE)); diff != "" {
		t.Fatalf("entries changed at steady state (-before +after):\n%s", diff)
	}
	if err := checkPodEntries(before, string(node.UID), want); err != nil {
		t.Fatal(err)
	}
	t.Logf("start: spire-controller-manager holds %d entries (and the admin entry); SPIRE counts %v", len(before)-1, writesBefore)

	// The carried-over config, with what a pod would get from its cluster.
	carried := readTestdata(t, "tcp-mtls-from-chart", "config.yaml")
	for old, replacement := range map[string]string{
		"spireServerAddress: " + chartServerAddress:      "spireServerAddress: " + stack.SPIRE.Address() + "\nclusterDomain: cluster.local",
		"workloadAPISocketPath: " + csiWorkloadAPISocket: "workloadAPISocketPath: " + agent.SocketPath(),
	} {
		if !strings.Contains(carried, old) {
			t.Fatalf("the carried-over config has no %q", old)
		}
		carried = strings.Replace(carried, old, replacement, 1)
	}
	// The Deployment's flags; outside a pod the Lease's namespace must be named.
	flags := []string{"--leader-elect=true", "--leader-election-namespace=" + namespace}

	if !t.Run("dry run beside spire-controller-manager plans no write", func(t *testing.T) {
		plan := filepath.Join(t.TempDir(), "plan.jsonl")
		dry := realcluster.NewRegistrar(t, realcluster.RegistrarOptions{Binary: bin, Kubeconfig: stack.Kube.Kubeconfig(), Config: carried,
			Flags: append(slices.Clone(flags), "--dry-run", "--dry-run-output="+plan)})
		waitResyncs(ctx, t, dry, 2)
		if data, err := os.ReadFile(plan); err != nil || len(data) != 0 {
			t.Errorf("the dry run planned writes (%v):\n%s", err, data)
		}
	}) {
		return
	}

	// Step: the chart upgraded with controllerManager.reconcile.* false. Its container restarts
	// with the same config but no kind to reconcile, keeps the chart's Lease, and writes nothing.
	if err := scm.Stop(); err != nil {
		t.Fatal(err)
	}
	realcluster.NewSCM(t, realcluster.SCMOptions{Kubeconfig: stack.Kube.Kubeconfig(), SPIRE: stack.SPIRE,
		ConfigYAML: scmConfig(reconcileNone), Dir: t.TempDir()})

	// Step: spire-registrar over TCP-mTLS with the carried-over config.
	start := time.Now()
	reg := realcluster.NewRegistrar(t, realcluster.RegistrarOptions{Binary: bin, Kubeconfig: stack.Kube.Kubeconfig(), Config: carried, Flags: flags})
	reg.WaitReady(t)
	waitResyncs(ctx, t, reg, 2)
	t.Logf("spire-registrar over TCP-mTLS: two full resyncs of each controller %s after start", time.Since(start).Round(time.Millisecond))

	if holder := leaseHolder(ctx, client, leaseName); holder == "" {
		t.Errorf("spire-registrar holds no Lease %s/%s", namespace, leaseName)
	}
	// The restarted chart container takes the chart's Lease over once the stopped one's
	// expires: the two Leases are apart, and neither program waits for the other's.
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		holder := leaseHolder(ctx, client, chartLease)
		return holder != "" && holder != scmHolder, nil
	}); err != nil {
		t.Errorf("the chart's container, its reconcile off, did not take its Lease %s/%s over: %v", namespace, chartLease, err)
	}
	after := sortedEntries(ctx, t, stack.SPIRE)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the migration changed SPIRE's entries (-before +after):\n%s", diff)
	}
	writesAfter, err := spireEntryWrites(ctx, stack.SPIRE)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(writesBefore, writesAfter); diff != "" {
		t.Errorf("SPIRE counted entry writes during the migration (-before +after):\n%s", diff)
	}
	for _, name := range chartClusterSPIFFEIDs {
		if _, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("the chart's ClusterSPIFFEID %s: %v", name, err)
		}
	}

	// After the migration, a new pod gets its entry from spire-registrar: one create.
	created := time.Now()
	want[string(runningPod("apps", "web-2", map[string]string{"app": "web"}).UID)] = workload
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := stack.SPIRE.EntryShow(ctx)
		if err != nil {
			return false, nil
		}
		last = checkPodEntries(entries, string(node.UID), want)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("a pod created after the migration: %v (last: %v)", err, last)
	}
	t.Logf("a pod created after the migration has its entry %s later", time.Since(created).Round(time.Millisecond))
	writesNew, err := spireEntryWrites(ctx, stack.SPIRE)
	if err != nil {
		t.Fatal(err)
	}
	oneCreate := map[string]float64{}
	for name, v := range writesAfter {
		oneCreate[name] = v
	}
	oneCreate["spire_server_rpc_entry_v1_entry_batch_create_entry"]++
	oneCreate["spire_server_datastore_registration_entry_create"]++
	if diff := cmp.Diff(oneCreate, writesNew); diff != "" {
		t.Errorf("SPIRE's entry writes for the new pod, want one create (-want +got):\n%s", diff)
	}
	now := sortedEntries(ctx, t, stack.SPIRE)
	for _, e := range before {
		if !slices.ContainsFunc(now, func(n realcluster.Entry) bool { return cmp.Equal(n, e) }) {
			t.Errorf("entry %s changed or went once the new pod's was written", e.ID)
		}
	}
}
