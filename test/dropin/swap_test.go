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

package dropin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	clusterName = "swap-cluster"
	gcInterval  = 2 * time.Second
	// steadyFor is how long SPIRE and the statuses must stay unchanged to call it steady.
	steadyFor = 4 * gcInterval
)

// chartConfig is the ControllerManagerConfig as the official Helm chart writes it, with the
// metrics and health endpoints moved to free loopback ports and a short gcInterval.
func chartConfig(metricsAddr, healthAddr, trustDomain, socket string) string {
	return fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
metadata:
  name: spire-controller-manager
  namespace: spire-server
  labels:
    app.kubernetes.io/name: server
    app.kubernetes.io/instance: spire
metrics:
  bindAddress: %s
health:
  healthProbeBindAddress: %s
gcInterval: %d
logLevel: info
logEncoding: console
leaderElection:
  leaderElect: true
  resourceName: 6f304bd2.spiffe.io
  resourceNamespace: spire-server
  leaseDuration: 15s
  renewDeadline: 10s
  retryPeriod: 2s
validatingWebhookConfigurationName: spire-server-spire-controller-manager-webhook
entryIDPrefix: %s
clusterName: %s
clusterDomain: cluster.local
trustDomain: %s
ignoreNamespaces:
  - kube-system
  - kube-public
  - local-path-storage
  - openshift-.*
  - ibm-.*
spireServerSocketPath: %s
className: %s
watchClassless: false
filterByClassName: true
parentIDTemplate: "spiffe://{{ .TrustDomain }}/spire/agent/k8s_psat/{{ .ClusterName }}/{{ .NodeMeta.UID }}"
reconcile:
  clusterSPIFFEIDs: true
  clusterFederatedTrustDomains: true
  clusterStaticEntries: true
`, metricsAddr, healthAddr, gcInterval.Nanoseconds(), clusterName, clusterName, trustDomain, socket, className)
}

// TestSwap stops spire-controller-manager v0.7.0 at steady state, starts spire-registrar with
// the same config file, args and env, and then rolls back: SPIRE must see no write at either
// step (but spire-controller-manager's start-up probe entry on rollback), and keep every entry
// and relationship field for field, IDs and revision numbers included.
func TestSwap(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a full cluster, PostgreSQL, SPIRE and spire-controller-manager; skipped with -short")
	}
	bin := buildRegistrar(t)
	pg := realcluster.NewPostgres(t, realcluster.PostgresOptions{})
	stack := realcluster.NewStackWith(t, realcluster.StackOptions{
		Kube:    realcluster.KubeOptions{Full: true},
		SPIRE:   realcluster.SPIREOptions{Postgres: pg},
		SCMCRDs: true,
	})
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(stack.Kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if v, err := stack.SPIRE.Version(ctx); err != nil || !strings.HasPrefix(v, "1.15.3") {
		t.Fatalf("spire-server version %q (%v), want 1.15.3", v, err)
	}

	createWorld(ctx, t, stack.Client)
	createResources(ctx, t, stack.SpireAPI, partnerBundle(t))

	metricsAddr, healthAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)
	configYAML := []byte(chartConfig(metricsAddr, healthAddr, stack.SPIRE.TrustDomain(), stack.SPIRE.SocketPath()))
	// Both programs get the same file, args and env. ENABLE_WEBHOOKS=false: outside a
	// cluster spire-controller-manager cannot build its webhook's client (it uses
	// rest.InClusterConfig only), so the chart's default of true cannot be kept for it.
	env := []string{"ENABLE_WEBHOOKS=false"}
	scmOpts := realcluster.SCMOptions{
		Kubeconfig: stack.Kube.Kubeconfig(),
		SPIRE:      stack.SPIRE,
		ConfigYAML: configYAML,
		Env:        env,
		Dir:        t.TempDir(),
	}
	scm := realcluster.NewSCM(t, scmOpts)
	config, err := os.ReadFile(scm.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--config=" + scm.ConfigPath(), "--kubeconfig=" + stack.Kube.Kubeconfig()}

	waitSteady(ctx, t, stack.SPIRE, dyn, steadyFor, checkCoverage)
	// An edit that spire-controller-manager applies by updating entries in place, so that
	// revision numbers other than 0 are compared too.
	ledger, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, "ledger", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ledger.Spec.Hint, ledger.Spec.TTL = "ledger-v2", metav1.Duration{Duration: 20 * time.Minute}
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Update(ctx, ledger, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, writesBefore := waitSteady(ctx, t, stack.SPIRE, dyn, steadyFor, func(s snapshot) error {
		for _, e := range s.Entries {
			if strings.Contains(e.SPIFFEID, "/ledger/") && (e.Hint != "ledger-v2" || e.X509SVIDTTL != 1200 || e.RevisionNumber == 0) {
				return fmt.Errorf("ledger entry not updated in place yet: %+v", e)
			}
		}
		return checkCoverage(s)
	})
	updated := 0
	for _, e := range before.Entries {
		if e.RevisionNumber > 0 {
			updated++
		}
	}
	t.Logf("spire-controller-manager steady: %d entries (%d updated in place, revision > 0), %d relationships, %d statuses",
		len(before.Entries), updated, len(before.Relationships), len(before.Status))
	checkStatuses(t, before)
	if writesBefore["spire_server_rpc_entry_v1_entry_batch_create_entry"] == 0 || writesBefore["spire_server_datastore_registration_entry_create"] == 0 {
		t.Fatalf("SPIRE's telemetry counts no entry creates after spire-controller-manager's run: %v; the metric names are wrong", writesBefore)
	}

	if n, err := statusWrites(ctx, stack.Client); err != nil || n == 0 {
		t.Fatalf("kube-apiserver counts %v status writes after spire-controller-manager's run (%v); the metric is misread", n, err)
	}

	// What a careful user does first: a dry run next to the running spire-controller-manager
	// (no leader election, endpoints of its own) must plan no write at all.
	dryStart := time.Now()
	plan := filepath.Join(t.TempDir(), "plan.jsonl")
	dryMetrics, dryHealth := freeLoopbackAddr(t), freeLoopbackAddr(t)
	dry := startRegistrar(t, bin, t.TempDir(), append(slices.Clone(args), "--dry-run", "--dry-run-output="+plan,
		"--leader-elect=false", "--metrics-bind-address="+dryMetrics, "--health-probe-bind-address="+dryHealth), env)
	if err := waitResyncs(ctx, "http://"+dryMetrics+"/metrics", 2); err != nil {
		t.Fatal(err)
	}
	dry.stop(t)
	if data, err := os.ReadFile(plan); err != nil || len(data) != 0 {
		t.Errorf("the dry run next to spire-controller-manager planned writes (%v):\n%s", err, data)
	}
	t.Logf("dry run: an empty plan after 2 full resyncs, %s after start", time.Since(dryStart).Round(time.Millisecond))

	// The swap.
	if err := scm.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	reg := startRegistrar(t, bin, scm.Dir(), args, env)
	if err := reg.waitReady(ctx, "http://"+healthAddr+"/readyz"); err != nil {
		t.Fatal(err)
	}
	timeToReady := time.Since(start)
	if err := waitResyncs(ctx, "http://"+metricsAddr+"/metrics", 1); err != nil {
		t.Fatal(err)
	}
	timeToResync := time.Since(start)
	if err := waitResyncs(ctx, "http://"+metricsAddr+"/metrics", 4); err != nil {
		t.Fatal(err)
	}
	after, writesAfter := waitSteady(ctx, t, stack.SPIRE, dyn, steadyFor, checkCoverage)
	// At steady state, status is written only when it changes: never.
	if n := statusWritesDuring(ctx, t, stack.Client, 3*gcInterval); n != 0 {
		t.Errorf("spire-registrar wrote status %.0f times in %s at steady state", n, 3*gcInterval)
	}
	swapWrites := writesAfter.sub(writesBefore)
	if len(swapWrites) != 0 {
		t.Errorf("SPIRE counted writes after the swap: %v", swapWrites)
	}
	if diff := cmp.Diff(withoutKnownStatusDifferences(t, before, false), withoutKnownStatusDifferences(t, after, true)); diff != "" {
		t.Errorf("after the swap (-spire-controller-manager +spire-registrar):\n%s", diff)
	}
	t.Logf("swap: spire-registrar ready %s after start, first full resyncs done after %s; %.0f writes; %d entries and %d relationships compared",
		timeToReady.Round(time.Millisecond), timeToResync.Round(time.Millisecond), total(swapWrites), len(after.Entries), len(after.Relationships))

	// The rollback, with the very same config file.
	reg.stop(t)
	scm2 := realcluster.NewSCM(t, scmOpts)
	again, err := os.ReadFile(scm2.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(config), string(again)); diff != "" {
		t.Fatalf("the rollback's config file differs (-first +rollback):\n%s", diff)
	}
	rolledBack, writesRolledBack := waitSteady(ctx, t, stack.SPIRE, dyn, steadyFor, checkCoverage)
	if n := statusWritesDuring(ctx, t, stack.Client, 3*gcInterval); n != 0 {
		t.Errorf("spire-controller-manager wrote status %.0f times in %s at steady state", n, 3*gcInterval)
	}
	rollbackWrites := writesRolledBack.sub(writesAfter)
	// spire-controller-manager creates and deletes one probe entry at every start.
	probe := counters{
		"spire_server_rpc_entry_v1_entry_batch_create_entry": 1,
		"spire_server_datastore_registration_entry_create":   1,
		"spire_server_rpc_entry_v1_entry_batch_delete_entry": 1,
		"spire_server_datastore_registration_entry_delete":   1,
	}
	if diff := cmp.Diff(probe, rollbackWrites); diff != "" {
		t.Errorf("SPIRE's writes after the rollback, other than spire-controller-manager's probe entry (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(withoutKnownStatusDifferences(t, after, true), withoutKnownStatusDifferences(t, rolledBack, false)); diff != "" {
		t.Errorf("after the rollback (-spire-registrar +spire-controller-manager):\n%s", diff)
	}
	t.Logf("rollback: %.0f writes (its probe entry's create and delete); %d entries and %d relationships compared",
		total(rollbackWrites), len(rolledBack.Entries), len(rolledBack.Relationships))

	swapWithCompletedJob(ctx, t, swapEnv{stack: stack, dyn: dyn, scm: scm2, bin: bin, args: args, env: env,
		metricsAddr: metricsAddr, healthAddr: healthAddr})
}

func total(c counters) float64 {
	var n float64
	for _, v := range c {
		n += v
	}
	return n
}

// checkCoverage checks that the steady state holds what the workload is there to cover, so
// that a swap compared on it means something.
func checkCoverage(s snapshot) error { return checkCoverageWithJobEntries(0)(s) }

// checkCoverageWithJobEntries is checkCoverage when the completed Job pod of the last phase
// has n entries.
func checkCoverageWithJobEntries(n int) func(snapshot) error {
	return func(s snapshot) error { return coverage(s, n) }
}

func coverage(s snapshot, jobEntries int) error {
	var errs []error
	count := map[string]int{}
	for _, e := range s.Entries {
		if !strings.HasPrefix(e.ID, clusterName+".") {
			errs = append(errs, fmt.Errorf("entry %s for %s lacks the prefix %s.", e.ID, e.SPIFFEID, clusterName))
		}
		path := strings.TrimPrefix(e.SPIFFEID, "spiffe://example.org/")
		kind, _, _ := strings.Cut(path, "/")
		count[kind]++
		switch kind {
		case "ns": // web: templates, selectors, ttls, hint, federation, Service DNS names
			want := map[string]bool{"web": true, "web.apps": true, "web.apps.svc": true, "web.apps.svc.cluster.local": true}
			for _, n := range e.DNSNames {
				delete(want, n)
			}
			// web and web-shadow were created in the same second: the lower UID wins.
			winner := (e.Hint == "web" && e.X509SVIDTTL == 3600) || (e.Hint == "shadow" && e.X509SVIDTTL == 7200)
			if len(want) != 0 || len(e.DNSNames) != 5 || !winner || e.JWTSVIDTTL != 600 ||
				!cmp.Equal(e.FederatesWith, []string{partnerTD}) || len(e.Selectors) != 3 {
				errs = append(errs, fmt.Errorf("web entry %+v", e))
			}
		case "app":
			if !e.Admin || !e.Downstream || e.X509SVIDTTL != 1800 || len(e.DNSNames) != 2 {
				errs = append(errs, fmt.Errorf("api entry %+v", e))
			}
		case "fallback":
			if strings.HasPrefix(path, "fallback/apps/"+jobName+"-") {
				count["job"]++
				count[kind]--
			} else if !strings.HasPrefix(path, "fallback/apps/worker-") {
				errs = append(errs, fmt.Errorf("fallback entry for %s, want only the worker pods'", e.SPIFFEID))
			}
		case "db":
			// db and db-shadow were created in the same second: the lower UID wins.
			if (e.Hint != "db" && e.Hint != "shadow") || !e.Admin || !e.Downstream || len(e.FederatesWith) != 1 {
				errs = append(errs, fmt.Errorf("static entry %+v", e))
			}
		}
	}
	want := map[string]int{"ns": 3, "app": 2, "fallback": 2, "ledger": 2, "db": 1}
	if jobEntries > 0 {
		want["job"] = jobEntries
	}
	if diff := cmp.Diff(want, count); diff != "" {
		errs = append(errs, fmt.Errorf("entries by kind (-want +got):\n%s", diff))
	}
	var tds []string
	for _, r := range s.Relationships {
		tds = append(tds, r.TrustDomain)
		if r.TrustDomain == partnerTD && (r.BundleEndpointURL != "https://127.0.0.1:1/partner" || len(r.TrustDomainBundle) == 0) {
			errs = append(errs, fmt.Errorf("partner.test relationship %+v, want the older resource's, with its bundle", r))
		}
	}
	if !cmp.Equal(tds, []string{partnerTD, webTD}) {
		errs = append(errs, fmt.Errorf("relationships for %v, want %v", tds, []string{partnerTD, webTD}))
	}
	return errors.Join(errs...)
}

// checkStatuses checks the statuses spire-controller-manager wrote are there to compare: every
// resource of its class has one, and no other resource has.
func checkStatuses(t *testing.T, s snapshot) {
	t.Helper()
	for _, key := range []string{"ClusterSPIFFEID/web", "ClusterSPIFFEID/web-shadow", "ClusterSPIFFEID/api", "ClusterSPIFFEID/ledger",
		"ClusterSPIFFEID/catch-all", "ClusterStaticEntry/db", "ClusterStaticEntry/db-shadow"} {
		if _, ok := s.Status[key]; !ok {
			t.Errorf("spire-controller-manager wrote no status on %s", key)
		}
	}
	for key, status := range s.Status {
		t.Logf("status of %s: %v", key, status)
	}
}
