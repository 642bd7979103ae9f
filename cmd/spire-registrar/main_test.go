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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// buildBinary builds spire-registrar as a user would run it.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "spire-registrar")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadConfigStopsStartup runs the binary with broken configs: each must exit non-zero
// before touching anything, with a message naming the field.
func TestBadConfigStopsStartup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	for _, tc := range []struct {
		name, config, want string
	}{
		{"missing trust domain", "clusterName: c\n", "trustDomain"},
		{"unknown field", "trustDomain: example.org\nclusterName: c\nspireSocket: /x\n", "spireSocket"},
		{"zero gcInterval", "trustDomain: example.org\nclusterName: c\ngcInterval: 0s\n", "gcInterval"},
		{"bad ignoreNamespaces", "trustDomain: example.org\nclusterName: c\nignoreNamespaces: [\"(\"]\n", "ignoreNamespaces[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--config", writeFile(t, tc.config), "--kubeconfig", "/nonexistent")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit = %v, want a non-zero exit\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output does not name %q:\n%s", tc.want, out)
			}
		})
	}
	out, err := exec.Command(bin, "--kubeconfig", "/nonexistent").CombinedOutput()
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
	bin := buildBinary(t)
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
	var logs syncBuffer
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
	bin := buildBinary(t)
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
	var logs syncBuffer
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
