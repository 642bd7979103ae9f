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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// writeManifest replaces a file of the manifest directory in one rename, as editors and
// ConfigMap updates do.
func writeManifest(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func copyExample(t *testing.T, dir, name string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	writeManifest(t, dir, name, string(data))
}

const appEntryTemplate = `apiVersion: spire.spiffe.io/v1alpha1
kind: ClusterStaticEntry
metadata:
  name: app
spec:
  spiffeID: spiffe://example.org/app/${APP_NAME}
  parentID: spiffe://example.org/spire/server
  selectors: ["unix:uid:1000"]
  dnsNames: [%s]
`

// TestStaticMode runs the binary with staticManifestPath and no Kubernetes at all against the
// real spire-server: the published examples become entries and federation relationships,
// edits and removals of files are applied without a restart, a file broken by an edit keeps
// what it declared, and health and metrics are served.
func TestStaticMode(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	spire := realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	copyExample(t, dir, "clusterstaticentry.yaml")
	copyExample(t, dir, "clusterfederatedtrustdomain.yaml")
	writeManifest(t, dir, "app.yaml", fmt.Sprintf(appEntryTemplate, ""))

	healthPort, metricsPort := freePort(t), freePort(t)
	config := writeFile(t, fmt.Sprintf("apiVersion: spire.spiffe.io/v1alpha1\nkind: ControllerManagerConfig\ntrustDomain: example.org\n"+
		"spireServerSocketPath: %s\nstaticManifestPath: %s\nexpandEnvStaticManifests: true\n"+
		"health: {healthProbeBindAddress: \"127.0.0.1:%d\"}\nmetrics: {bindAddress: \"127.0.0.1:%d\"}\n",
		spire.SocketPath(), dir, healthPort, metricsPort))
	var logs realcluster.SyncBuffer
	cmd := exec.Command(bin, "--config", config, "-v=2")
	// No Kubernetes: a kubeconfig that does not exist must not matter.
	cmd.Env = append(os.Environ(), "APP_NAME=payments", "KUBECONFIG=/nonexistent")
	cmd.Stdout, cmd.Stderr = &logs, &logs
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

	entries := func() map[string]realcluster.Entry {
		all, err := spire.EntryShow(ctx)
		if err != nil {
			return nil
		}
		bySPIFFEID := map[string]realcluster.Entry{}
		for _, e := range all {
			bySPIFFEID[e.SPIFFEID] = e
		}
		return bySPIFFEID
	}
	trustDomains := func() []string {
		rels, err := spire.FederationShow(ctx)
		if err != nil {
			return nil
		}
		var tds []string
		for _, r := range rels {
			tds = append(tds, r.TrustDomain)
		}
		slices.Sort(tds)
		return tds
	}
	poll := func(what string, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("%s: not after a minute; entries %v, relationships %v", what, entries(), trustDomains())
		}
		return time.Since(start)
	}
	examples := []string{"spiffe://example.org/k8s-node/production-east", "spiffe://example.org/vm/billing/batch"}
	poll("examples and app registered", func() bool {
		got := entries()
		return len(got) == 3 && got[examples[0]].ID != "" && got[examples[1]].ID != "" &&
			got["spiffe://example.org/app/payments"].ID != "" &&
			slices.Equal(trustDomains(), []string{"backend.example.net", "payments.example.com"})
	})
	if code, body := get(fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)); code != 200 {
		t.Errorf("/readyz = %d %s", code, body)
	}

	// An edit is applied in place: the same entry, with the new DNS name. (Selectors, SPIFFE
	// ID and parent ID identify an entry: changing one replaces it.)
	before := entries()["spiffe://example.org/app/payments"]
	writeManifest(t, dir, "app.yaml", fmt.Sprintf(appEntryTemplate, "payments.example.org"))
	took := poll("edited DNS names applied", func() bool {
		e := entries()["spiffe://example.org/app/payments"]
		return slices.Equal(e.DNSNames, []string{"payments.example.org"})
	})
	t.Logf("file edit to SPIRE: %v", took)
	if after := entries()["spiffe://example.org/app/payments"]; after.ID != before.ID {
		t.Errorf("edit replaced entry %s with %s instead of updating it", before.ID, after.ID)
	}

	// A file broken by an edit keeps what it declared; the problem is logged and counted.
	writeManifest(t, dir, "clusterstaticentry.yaml", "apiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterStaticEntry\nspec: [\n")
	poll("broken file reported", func() bool {
		_, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		return strings.Contains(body, "spire_registrar_static_manifest_errors 1") &&
			strings.Contains(logs.String(), "Invalid static manifest")
	})
	time.Sleep(2 * time.Second)
	if got := entries(); got[examples[0]].ID == "" || got[examples[1]].ID == "" {
		t.Errorf("entries of the broken file were removed: %v", got)
	}

	// Removing files removes what they declared, and nothing else.
	if err := os.Remove(filepath.Join(dir, "app.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "clusterfederatedtrustdomain.yaml")); err != nil {
		t.Fatal(err)
	}
	took = poll("removed files applied", func() bool {
		got := entries()
		return len(got) == 2 && got["spiffe://example.org/app/payments"].ID == "" && len(trustDomains()) == 0
	})
	t.Logf("file removal to SPIRE: %v", took)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20s after SIGTERM")
	}
}

// TestStaticModeBadStart: what static mode cannot do stops start-up, naming the cause, before
// SPIRE is touched.
func TestStaticModeBadStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := realcluster.RegistrarBinary(t)
	spire := realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clusterSPIFFEIDManifest := "apiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterSPIFFEID\nmetadata: {name: all}\nspec:\n  spiffeIDTemplate: spiffe://x/y\n"
	for _, tc := range []struct {
		name   string
		files  map[string]string
		config string
		args   []string
		env    []string
		want   []string
	}{
		{name: "ClusterSPIFFEID manifest", files: map[string]string{"ids.yaml": clusterSPIFFEIDManifest},
			want: []string{"ids.yaml", "ClusterSPIFFEID is not supported in static mode"}},
		{name: "undefined env var", files: map[string]string{"app.yaml": fmt.Sprintf(appEntryTemplate, "")},
			config: "expandEnvStaticManifests: true\n", want: []string{"app.yaml", "APP_NAME"}},
		{name: "declared twice", files: map[string]string{"a.yaml": fmt.Sprintf(appEntryTemplate, ""),
			"b.yaml": fmt.Sprintf(appEntryTemplate, "b.example.org")}, want: []string{"b.yaml", "already declared in", "a.yaml"}},
		{name: "leader election flag", args: []string{"--leader-elect"}, want: []string{"--leader-elect", "staticManifestPath"}},
		{name: "leader election config", config: "leaderElection: {leaderElect: true}\n", want: []string{"leaderElection.leaderElect"}},
		{name: "ClusterSPIFFEIDs reconciled", config: "reconcile: {clusterSPIFFEIDs: true}\n", want: []string{"reconcile.clusterSPIFFEIDs"}},
		{name: "missing directory", config: "staticManifestPath: /nonexistent/manifests\n", want: []string{"staticManifestPath", "/nonexistent/manifests"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				writeManifest(t, dir, name, content)
			}
			config := "trustDomain: example.org\nspireServerSocketPath: " + spire.SocketPath() + "\n" + tc.config
			if !strings.Contains(tc.config, "staticManifestPath") {
				config += "staticManifestPath: " + dir + "\n"
			}
			cmd := exec.CommandContext(ctx, bin, append([]string{"--config", writeFile(t, config)}, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit = %v, want a non-zero exit\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not name %q:\n%s", w, out)
				}
			}
		})
	}
	if got, err := spire.EntryShow(ctx); err != nil || len(got) != 0 {
		t.Errorf("SPIRE holds %d entries (err %v), want none", len(got), err)
	}
}
