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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestEmbeddedManager builds the example manager and runs it against the real components:
// spire-registrar's controllers register a pod while the manager's own controller, on the
// same shared pod informer, writes its ConfigMap.
func TestEmbeddedManager(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := filepath.Join(t.TempDir(), "example-manager")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	stack := realcluster.NewStack(t)
	kube, spire, client, spireAPI := stack.Kube, stack.SPIRE, stack.Client, stack.SpireAPI
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := realcluster.CreatePod(ctx, client, "default", name, node.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte("trustDomain: example.org\nclusterName: it\nspireServerSocketPath: "+spire.SocketPath()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	cmd := exec.Command(bin, "--kubeconfig", kube.Kubeconfig(), "--config", config)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("example-manager output:\n%s", logs.String())
		}
	}()

	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := spire.EntryShow(ctx)
		if err != nil || len(entries) != 2 {
			return false, nil
		}
		cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, statusConfigMap, metav1.GetOptions{})
		return err == nil && cm.Data["default"] == "2", nil
	})
	if err != nil {
		t.Fatalf("the embedded controllers did not both do their work")
	}
}

// TestEmbeddedManagerSurvivesAPIServerOutage runs the example manager with leader election
// through an API server outage longer than its lease: the library stops spire-registrar's
// controllers and stands by, without exiting the embedding binary, and leads again once the
// API server is back, registering a pod created then.
func TestEmbeddedManagerSurvivesAPIServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := filepath.Join(t.TempDir(), "example-manager")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	stack := realcluster.NewStack(t)
	kube, spire, client := stack.Kube, stack.SPIRE, stack.Client
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, err := realcluster.CreateNode(ctx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreatePod(ctx, client, "default", "before", node.Name); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte("trustDomain: example.org\nclusterName: it\nspireServerSocketPath: "+spire.SocketPath()+
		"\nleaderElection: {leaderElect: true, resourceName: example-manager, resourceNamespace: default, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs realcluster.SyncBuffer
	cmd := exec.Command(bin, "--kubeconfig", kube.Kubeconfig(), "--config", config)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("example-manager output:\n%s", logs.String())
		}
	}()
	hasEntry := func(pod string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			entries, err := spire.EntryShow(ctx)
			if err != nil {
				return false, nil
			}
			for _, e := range entries {
				if e.SPIFFEID == "spiffe://example.org/pod/"+pod {
					return true, nil
				}
			}
			return false, nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, hasEntry("before")); err != nil {
		t.Fatal("the embedded controllers did not register the first pod")
	}

	kube.StopAPIServer()
	time.Sleep(15 * time.Second)
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("example-manager exited during the API server outage: %v", err)
	default:
	}
	if err := kube.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if _, err := realcluster.CreatePod(ctx, client, "default", "after", node.Name); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, hasEntry("after")); err != nil {
		t.Fatal("the embedded controllers did not lead again after the outage")
	}
	t.Logf("a pod created after the outage got its entry %v after the API server returned", time.Since(back).Round(time.Millisecond))
	if !strings.Contains(logs.String(), "Leadership ended") {
		t.Errorf("the leadership never ended during an outage longer than the lease")
	}
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("example-manager exited: %v", err)
	default:
	}
}
