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
	"bytes"
	"context"
	"errors"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestMain runs the tests and removes the spire-registrar binary they built.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := realcluster.RemoveRegistrarBinary(); err != nil {
		log.Printf("remove the spire-registrar binary: %v", err)
	}
	os.Exit(code)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadConfigStopsStartup runs the binary with broken configs and flags: each must exit
// non-zero before touching anything, with a message naming the field (or, for a file that is
// not YAML, the line).
func TestBadConfigStopsStartup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := realcluster.RegistrarBinary(t)
	// base is a valid config; most cases add one broken field to it.
	const base = "apiVersion: spire.spiffe.io/v1alpha1\nkind: ControllerManagerConfig\ntrustDomain: example.org\nclusterName: c\n"
	const bare = "trustDomain: example.org\nclusterName: c\n"
	cases := []struct {
		name, config string
		args         []string // extra flags
		want         []string // what the output must name
	}{
		{name: "missing trust domain", config: "clusterName: c\n", want: []string{"trustDomain"}},
		{name: "zero gcInterval", config: bare + "gcInterval: 0s\n", want: []string{"gcInterval"}},
		{name: "bad ignoreNamespaces", config: bare + "ignoreNamespaces: [\"(\"]\n", want: []string{"ignoreNamespaces[0]"}},

		// Type of the file.
		{name: "wrong apiVersion", config: "apiVersion: v1\n" + bare, want: []string{"apiVersion"}},
		{name: "other group apiVersion", config: "apiVersion: spire.spiffe.io/v1beta1\n" + bare, want: []string{"apiVersion"}},
		{name: "wrong kind", config: "kind: ConfigMap\n" + bare, want: []string{"kind"}},

		// trustDomain and clusterName.
		{name: "empty trust domain", config: "trustDomain: \"\"\nclusterName: c\n", want: []string{"trustDomain"}},
		{name: "upper-case trust domain", config: "trustDomain: Example.ORG\nclusterName: c\n", want: []string{"trustDomain"}},
		{name: "trust domain as URI", config: "trustDomain: spiffe://example.org\nclusterName: c\n", want: []string{"trustDomain"}},
		{name: "trust domain with a path", config: "trustDomain: example.org/ns\nclusterName: c\n", want: []string{"trustDomain"}},
		{name: "trust domain with a port", config: "trustDomain: example.org:8443\nclusterName: c\n", want: []string{"trustDomain"}},
		{name: "trust domain with a space", config: "trustDomain: example org\nclusterName: c\n", want: []string{"trustDomain"}},
		{name: "missing cluster name", config: "trustDomain: example.org\n", want: []string{"clusterName"}},
		{name: "empty file", config: "", want: []string{"trustDomain", "clusterName"}},

		// clusterDomain, ignoreNamespaces, parentIDTemplate.
		{name: "cluster domain with a leading dot", config: base + "clusterDomain: .cluster.local\n", want: []string{"clusterDomain"}},
		{name: "cluster domain with a trailing dot", config: base + "clusterDomain: cluster.local.\n", want: []string{"clusterDomain"}},
		{name: "second ignoreNamespaces bad", config: base + "ignoreNamespaces: [kube-system, \"[a-\"]\n", want: []string{"ignoreNamespaces[1]"}},
		{name: "ignoreNamespaces bad repetition", config: base + "ignoreNamespaces: [\"*-system\"]\n", want: []string{"ignoreNamespaces[0]"}},
		{name: "ignoreNamespaces as a string", config: base + "ignoreNamespaces: kube-system\n", want: []string{"ignoreNamespaces"}},
		{name: "unterminated parentIDTemplate", config: base + "parentIDTemplate: \"spiffe://{{ .TrustDomain }}/{{ .NodeMeta.Name\"\n",
			want: []string{"parentIDTemplate"}},
		{name: "parentIDTemplate unknown function", config: base + "parentIDTemplate: \"spiffe://{{ nodeName }}/agent\"\n",
			want: []string{"parentIDTemplate"}},
		{name: "parentIDTemplate unclosed action", config: base + "parentIDTemplate: \"spiffe://x/{{ if .NodeMeta }}agent\"\n",
			want: []string{"parentIDTemplate"}},

		// gcInterval.
		{name: "negative gcInterval", config: base + "gcInterval: -5s\n", want: []string{"gcInterval"}},
		{name: "gcInterval not a duration", config: base + "gcInterval: abc\n", want: []string{"gcInterval"}},
		{name: "gcInterval in days", config: base + "gcInterval: 1d\n", want: []string{"gcInterval"}},
		{name: "fractional gcInterval", config: base + "gcInterval: 1.5\n", want: []string{"gcInterval"}},
		{name: "negative integer gcInterval", config: base + "gcInterval: -1\n", want: []string{"gcInterval"}},
		{name: "gcInterval as a list", config: base + "gcInterval: [10s]\n", want: []string{"gcInterval"}},

		// Entry ID prefixes.
		{name: "prefix with a dot", config: base + "entryIDPrefix: a.b\n", want: []string{"entryIDPrefix"}},
		{name: "prefix with a space", config: base + "entryIDPrefix: \"my prefix\"\n", want: []string{"entryIDPrefix"}},
		{name: "too long prefix", config: base + "entryIDPrefix: " + strings.Repeat("p", 65) + "\n", want: []string{"entryIDPrefix"}},
		{name: "cleanup equal to prefix", config: base + "entryIDPrefix: a\nentryIDPrefixCleanup: a\n", want: []string{"entryIDPrefixCleanup"}},
		{name: "cleanup of unprefixed without prefix", config: base + "entryIDPrefixCleanup: \"\"\n", want: []string{"entryIDPrefixCleanup"}},
		{name: "cleanup with a slash", config: base + "entryIDPrefix: new\nentryIDPrefixCleanup: old/\n", want: []string{"entryIDPrefixCleanup"}},

		// reconcile.
		// A block that enables nothing is accepted, as spire-controller-manager does, unless a
		// kind in it is misspelt.
		{name: "reconcile misspelt kind", config: base + "reconcile:\n  clusterSPIFFEID: true\n",
			want: []string{"reconcile", "did you mean reconcile.clusterSPIFFEIDs?"}},
		{name: "reconcile as a list", config: base + "reconcile: [clusterSPIFFEIDs]\n", want: []string{"reconcile"}},

		// Serving.
		{name: "metrics address without port", config: base + "metrics:\n  bindAddress: nowhere\n", want: []string{"metrics.bindAddress"}},
		{name: "metrics address port only", config: base + "metrics:\n  bindAddress: \"8082\"\n", want: []string{"metrics.bindAddress"}},
		{name: "metrics as a string", config: base + "metrics: \":8082\"\n", want: []string{"metrics"}},
		{name: "health address port only", config: base + "health:\n  healthProbeBindAddress: \"8083\"\n", want: []string{"health.healthProbeBindAddress"}},
		{name: "health address with a path", config: base + "health:\n  healthProbeBindAddress: localhost:8083/healthz\n", want: []string{"health.healthProbeBindAddress"}},
		{name: "readiness name with a slash", config: base + "health:\n  readinessEndpointName: a/b\n", want: []string{"health.readinessEndpointName"}},
		{name: "liveness name with a leading slash", config: base + "health:\n  livenessEndpointName: /healthz\n", want: []string{"health.livenessEndpointName"}},
		{name: "liveness name with a query", config: base + "health:\n  livenessEndpointName: \"healthz?verbose\"\n", want: []string{"health.livenessEndpointName"}},

		// Leader election.
		{name: "config map lock", config: base + "leaderElection:\n  resourceLock: configmaps\n", want: []string{"leaderElection.resourceLock"}},
		{name: "endpoints lock", config: base + "leaderElection:\n  resourceLock: endpointsleases\n", want: []string{"leaderElection.resourceLock"}},
		{name: "renew after lease", config: base + "leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n", want: []string{"leaderElection.renewDeadline"}},
		{name: "renew equal to lease", config: base + "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n", want: []string{"leaderElection.renewDeadline"}},
		{name: "renew after default lease", config: base + "leaderElection:\n  renewDeadline: 20s\n", want: []string{"leaderElection.renewDeadline"}},
		{name: "zero lease", config: base + "leaderElection:\n  leaseDuration: 0s\n", want: []string{"leaderElection.leaseDuration"}},
		{name: "negative lease", config: base + "leaderElection:\n  leaseDuration: -15s\n", want: []string{"leaderElection.leaseDuration"}},
		{name: "bad retry period", config: base + "leaderElection:\n  retryPeriod: often\n", want: []string{"leaderElection.retryPeriod"}},
		{name: "leaderElect not a boolean", config: base + "leaderElection:\n  leaderElect: maybe\n", want: []string{"leaderElect"}},

		// spire-controller-manager fields: accepted, but a bad value is refused by name.
		{name: "unknown logLevel", config: base + "logLevel: verbose\n", want: []string{"logLevel"}},
		{name: "unknown logEncoding", config: base + "logEncoding: logfmt\n", want: []string{"logEncoding"}},
		{name: "webhook port out of range", config: base + "webhook:\n  port: 70000\n", want: []string{"webhook.port"}},
		{name: "syncPeriod not a duration", config: base + "syncPeriod: often\n", want: []string{"syncPeriod"}},
		{name: "both cacheNamespace fields", config: base + "cacheNamespace: spire\ncacheNamespaces:\n  spire: {}\n", want: []string{"cacheNamespace"}},
		{name: "gracefulShutDown not a duration", config: base + "gracefulShutDown: soon\n", want: []string{"gracefulShutDown"}},
		{name: "filterByClassName without className", config: base + "filterByClassName: true\n", want: []string{"className"}},

		// Decoding. Unknown and duplicated fields are not errors; values of the wrong type are.
		{name: "misspelt required field", config: "trustDomain: example.org\nclustername: c\n", want: []string{"clusterName", "did you mean clusterName?"}},
		{name: "required field in the wrong case", config: "TrustDomain: example.org\nclusterName: c\n", want: []string{"trustDomain", "did you mean trustDomain?"}},
		{name: "cluster name as a number", config: "trustDomain: example.org\nclusterName: 123\n", want: []string{"clusterName", "quote"}},
		{name: "cluster name as a list", config: "trustDomain: example.org\nclusterName: [a, b]\n", want: []string{"clusterName"}},
		{name: "watchClassless not a boolean", config: base + "watchClassless: sometimes\n", want: []string{"watchClassless"}},
		{name: "metadata as a string", config: base + "metadata: config\n", want: []string{"metadata"}},
		{name: "unclosed flow sequence", config: base + "ignoreNamespaces: [kube-system\n", want: []string{"yaml: line"}},
		{name: "tab indentation", config: base + "metrics:\n\tbindAddress: \":8082\"\n", want: []string{"yaml: line"}},
		{name: "several problems", config: "apiVersion: v2\ntrustDomain: example.org\nclusterName: c\ngcInterval: 0s\nlogLevel: loud\n",
			want: []string{"apiVersion", "gcInterval", "logLevel"}},

		// Flags.
		{name: "zero workers", config: base, args: []string{"--workers", "0"}, want: []string{"--workers"}},
		{name: "zero write spread", config: base, args: []string{"--write-spread", "0"}, want: []string{"--write-spread"}},
		{name: "resync share above 1", config: base, args: []string{"--max-resync-share", "2"}, want: []string{"--max-resync-share"}},
		{name: "missing config file", args: []string{"--config", "/nonexistent/config.yaml"}, want: []string{"/nonexistent/config.yaml"}},
		{name: "bad --zap-log-level", config: base, args: []string{"--zap-log-level", "loud"}, want: []string{"--zap-log-level"}},
		{name: "--dry-run-output without --dry-run", config: base, args: []string{"--dry-run-output", "/tmp/plan"}, want: []string{"--dry-run-output"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := []string{"--kubeconfig", "/nonexistent"}
			if tc.config != "" || tc.args == nil {
				args = append(args, "--config", writeFile(t, tc.config))
			}
			cmd := exec.CommandContext(ctx, bin, append(args, tc.args...)...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit = %v, want a non-zero exit\n%s", err, out)
			}
			for _, want := range tc.want {
				if !strings.Contains(string(out), want) {
					t.Errorf("output does not name %q:\n%s", want, out)
				}
			}
			t.Logf("%s", bytes.TrimSpace(out))
		})
	}
	t.Logf("%d bad configs stopped start-up", len(cases))

	// The config and args the official Helm chart gives spire-controller-manager are accepted:
	// start-up gets past them and only stops at the missing kubeconfig.
	chart := writeFile(t, realcluster.ChartConfig)
	out, err := exec.Command(bin, "--config", chart, "--expand-env", "--kubeconfig", "/nonexistent", "--zap-log-level", "info").CombinedOutput()
	if err == nil || strings.Contains(string(out), "invalid config") || !strings.Contains(string(out), "/nonexistent") {
		t.Errorf("chart config: err=%v, want a failure on the kubeconfig only:\n%s", err, out)
	}

	// The same config as a newer chart might write it, with a misspelt and a duplicated field
	// besides: start-up gets as far, and warns of each field it ignored.
	newer := strings.NewReplacer(
		"leaderElection: {leaderElect: true,", "leaderElection: {foo: 1, leaderElect: true,",
		"clusterName: example-cluster\n", "clusterName: example-cluster\nclusterName: example-cluster\n",
	).Replace(realcluster.ChartConfig) + "entryRenderCacheTTL: 10m\ntrustdomain: example.org\n"
	out, err = exec.Command(bin, "--config", writeFile(t, newer), "--kubeconfig", "/nonexistent").CombinedOutput()
	if err == nil || strings.Contains(string(out), "invalid config") || !strings.Contains(string(out), "/nonexistent") {
		t.Errorf("newer chart config: err=%v, want a failure on the kubeconfig only:\n%s", err, out)
	}
	for _, want := range []string{
		`unknown config field, perhaps one of a newer spire-controller-manager" field="leaderElection.foo"`,
		`unknown config field, perhaps one of a newer spire-controller-manager" field="entryRenderCacheTTL"`,
		`unknown config field, probably misspelt" field="trustdomain" didYouMean="trustDomain"`,
		`config field set more than once; the last value is used" field="clusterName"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("newer chart config: output does not hold %s:\n%s", want, out)
		}
	}

	out, err = exec.Command(bin, "--kubeconfig", "/nonexistent").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--config") {
		t.Errorf("running without --config: err=%v, output:\n%s", err, out)
	}
}

// TestBinaryAgainstRealComponents runs the binary out of cluster with --kubeconfig against the
// real kube-apiserver and spire-server, checks that it registers a pod, and that SIGTERM stops
// it cleanly.
func TestBinaryAgainstRealComponents(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStack(t)
	kube, spire, client, spireAPI := stack.Kube, stack.SPIRE, stack.Client, stack.SpireAPI
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreatePod(ctx, client, "default", "web", node.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	config := writeFile(t, "apiVersion: spire.spiffe.io/v1alpha1\nkind: ControllerManagerConfig\ntrustDomain: example.org\n"+
		"clusterName: it\nspireServerSocketPath: "+spire.SocketPath()+"\n")
	var logs realcluster.SyncBuffer
	cmd := exec.Command(bin, "--kubeconfig", kube.Kubeconfig(), "--config", config, "-v=2")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("spire-registrar output:\n%s", logs.String())
		}
	}()

	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := spire.EntryShow(ctx)
		return err == nil && len(entries) == 1 && entries[0].SPIFFEID == "spiffe://example.org/ns/default/pod/web", nil
	})
	if err != nil {
		t.Fatalf("the binary never registered the pod")
	}
	t.Logf("binary start to first entry: %v", time.Since(start))

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20s after SIGTERM")
	}
	if !strings.Contains(logs.String(), "Stopped controller") {
		t.Errorf("no clean shutdown in the log")
	}
}

// TestDryRunWritesNothing runs the binary with --dry-run on a SPIRE server that already holds
// an entry nobody declares, with a pod that needs one: both changes are logged with their
// reasons, and SPIRE is left exactly as it was.
func TestDryRunWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStack(t)
	kube, spire, client, spireAPI := stack.Kube, stack.SPIRE, stack.Client, stack.SpireAPI
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	orphan, err := spire.CreateEntryCLI(ctx, realcluster.EntrySpec{
		SPIFFEID: "spiffe://example.org/legacy", ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:1"}})
	if err != nil {
		t.Fatal(err)
	}
	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreatePod(ctx, client, "default", "web", node.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	config := writeFile(t, "trustDomain: example.org\nclusterName: it\nspireServerSocketPath: "+spire.SocketPath()+"\n")
	var logs realcluster.SyncBuffer
	cmd := exec.Command(bin, "--kubeconfig", kube.Kubeconfig(), "--config", config, "--dry-run")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), "Dry run: would create entry") && strings.Contains(logs.String(), "Dry run: would delete entry"), nil
	})
	if err != nil {
		t.Fatalf("no dry-run plan logged:\n%s", logs.String())
	}
	for _, want := range []string{"spiffe://example.org/pod/web", "declared by ClusterSPIFFEID all", orphan.ID, "declared by no resource"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("dry-run log lacks %q", want)
		}
	}
	entries, err := spire.EntryShow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].ID != orphan.ID || entries[0].RevisionNumber != orphan.RevisionNumber {
		t.Errorf("SPIRE changed in a dry run: %+v", entries)
	}
}
