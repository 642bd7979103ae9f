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

package app_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// leakMarkers are what the stack of a goroutine Run started mentions: this module's
// controllers and clients, client-go's informers, reflectors, watches, work queues and event
// broadcasters, and gRPC (the SPIRE connection, which the test closes before checking). A
// goroutine with none of them (the test's own HTTP connections, the real-cluster process
// reapers) is not Run's to stop.
var leakMarkers = []string{
	"github.com/spire-registrar/spire-registrar/pkg/controller",
	"github.com/spire-registrar/spire-registrar/pkg/app",
	"github.com/spire-registrar/spire-registrar/pkg/spire",
	"github.com/spire-registrar/spire-registrar/pkg/metrics",
	"k8s.io/client-go/tools/cache",
	"k8s.io/client-go/util/workqueue",
	"k8s.io/client-go/tools/record",
	"k8s.io/apimachinery/pkg/watch",
	"google.golang.org/grpc",
}

// goroutine is one goroutine of a runtime.Stack dump.
type goroutine struct {
	id    uint64
	stack string
}

// goroutines returns every goroutine of the process.
func goroutines() []goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var all []goroutine
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		header, _, _ := bytes.Cut(block, []byte("\n"))
		fields := strings.Fields(string(header)) // "goroutine 42 [chan receive]:"
		if len(fields) < 2 || fields[0] != "goroutine" {
			continue
		}
		id, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			continue
		}
		all = append(all, goroutine{id: id, stack: string(block)})
	}
	return all
}

// goroutineIDs returns the IDs of the goroutines running now.
func goroutineIDs() map[uint64]bool {
	ids := map[uint64]bool{}
	for _, g := range goroutines() {
		ids[g.id] = true
	}
	return ids
}

// leakedGoroutines returns the goroutines not in before whose stacks mention a leak marker.
func leakedGoroutines(before map[uint64]bool) []goroutine {
	var leaked []goroutine
	for _, g := range goroutines() {
		if before[g.id] {
			continue
		}
		if slices.ContainsFunc(leakMarkers, func(m string) bool { return strings.Contains(g.stack, m) }) {
			leaked = append(leaked, g)
		}
	}
	return leaked
}

// expectNoLeakedGoroutines fails the test with the stacks of the goroutines started since
// before that still run after a grace period for them to wind down.
func expectNoLeakedGoroutines(t *testing.T, before map[uint64]bool, grace time.Duration) {
	t.Helper()
	var leaked []goroutine
	for deadline := time.Now().Add(grace); ; time.Sleep(100 * time.Millisecond) {
		if leaked = leakedGoroutines(before); len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	var stacks strings.Builder
	for _, g := range leaked {
		fmt.Fprintf(&stacks, "\n%s\n", g.stack)
	}
	t.Errorf("%d goroutines left behind %v after Run returned:%s", len(leaked), grace, stacks.String())
}

// TestRunLeavesNoGoroutineBehind runs every controller through app.Run, wired as the binary
// wires them, against a real kube-apiserver and spire-server, lets them do real work (pods
// registered, a static entry, a federation relationship, an Event for an invalid resource),
// then cancels the context: Run must return promptly and leave no goroutine of its own, of
// the controllers, or of client-go's informer, queue and event machinery behind.
func TestRunLeavesNoGoroutineBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	stack := realcluster.NewStack(t)
	client, spireAPI := stack.Client, stack.SpireAPI
	testCtx, testCancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer testCancel()

	node, err := realcluster.CreateNode(testCtx, client, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(testCtx, &spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := realcluster.CreatePod(testCtx, client, "default", "before", node.Name); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("trustDomain: " + stack.SPIRE.TrustDomain() + "\nclusterName: it\nclusterDomain: cluster.local\n" +
		"spireServerSocketPath: " + stack.SPIRE.SocketPath() + "\ngcInterval: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}

	// Everything that exists now is not Run's; the SPIRE client is the test's, like the
	// binary's, and is closed before the check. Run builds the chain on it (metrics,
	// batching) and must release that itself.
	before := goroutineIDs()
	spireClient, err := app.DialSPIRE(testCtx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	closeSPIRE := func() {
		if err := spireClient.Close(); err != nil {
			t.Errorf("closing the SPIRE client: %v", err)
		}
	}
	kubeInformers, spireInformers := app.NewInformerFactories(client, spireAPI)
	health := &app.Health{}
	ctx, cancel := context.WithCancel(testCtx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.ControllerContext{Config: cfg, KubeClient: client, SpireAPIClient: spireAPI,
			KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: spireClient}, 4, health)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
			closeSPIRE()
		}
	}()

	poll := func(what string, condition func(context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(testCtx, 100*time.Millisecond, time.Minute, true, condition); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	poll("the controllers' first sync", func(context.Context) (bool, error) { return health.Ready() == nil, nil })

	// Work for every worker: pods, a static entry, a relationship, and an invalid static entry
	// whose Event goes through the broadcaster.
	for _, name := range []string{"after-1", "after-2"} {
		if _, err := realcluster.CreatePod(testCtx, client, "default", name, node.Name); err != nil {
			t.Fatal(err)
		}
	}
	for _, cse := range []spirev1alpha1.ClusterStaticEntrySpec{
		{SPIFFEID: "spiffe://example.org/db", ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:999"}},
		{SPIFFEID: "spiffe://other.org/db", ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:998"}},
	} {
		name := strings.NewReplacer("spiffe://", "", ".", "-", "/", "-").Replace(cse.SPIFFEID)
		if _, err := spireAPI.SpireV1alpha1().ClusterStaticEntries().Create(testCtx, &spirev1alpha1.ClusterStaticEntry{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: cse}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().Create(testCtx, &spirev1alpha1.ClusterFederatedTrustDomain{
		ObjectMeta: metav1.ObjectMeta{Name: "partner"},
		Spec: spirev1alpha1.ClusterFederatedTrustDomainSpec{TrustDomain: "partner.org", BundleEndpointURL: "https://127.0.0.1:1/bundle",
			BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSWebProfileType}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"spiffe://example.org/db", "spiffe://example.org/pod/after-1", "spiffe://example.org/pod/after-2", "spiffe://example.org/pod/before"}
	poll("the entries", func(ctx context.Context) (bool, error) {
		entries, err := stack.SPIRE.EntryShow(ctx)
		if err != nil {
			return false, nil
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.SPIFFEID)
		}
		slices.Sort(got)
		return slices.Equal(got, want), nil
	})
	poll("the relationship", func(ctx context.Context) (bool, error) {
		rels, err := stack.SPIRE.FederationShow(ctx)
		return err == nil && len(rels) == 1 && rels[0].TrustDomain == "partner.org", nil
	})
	poll("the InvalidSpec Event", func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=other-org-db,reason=InvalidSpec"})
		return err == nil && len(events.Items) > 0, nil
	})

	cancel()
	const bound = 30 * time.Second
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("Run still running %v after its context was cancelled", bound)
	}
	t.Logf("Run returned %v after cancel", time.Since(start).Round(time.Millisecond))
	stopped = true
	closeSPIRE()
	expectNoLeakedGoroutines(t, before, 5*time.Second)
}

// TestRunStaticLeavesNoGoroutineBehind is the same check for static mode: its file poller,
// informers and watch broadcasters stop with RunStatic.
func TestRunStaticLeavesNoGoroutineBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real spire-server")
	}
	spireServer := realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	testCtx, testCancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer testCancel()
	dir := t.TempDir()
	manifest := "apiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterStaticEntry\nmetadata: {name: db}\n" +
		"spec: {spiffeID: spiffe://example.org/db, parentID: spiffe://example.org/spire/server, selectors: [unix:uid:999]}\n" +
		"---\napiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterFederatedTrustDomain\nmetadata: {name: partner}\n" +
		"spec: {trustDomain: partner.org, bundleEndpointURL: \"https://127.0.0.1:1/bundle\", bundleEndpointProfile: {type: https_web}}\n"
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("trustDomain: example.org\nstaticManifestPath: " + dir + "\n"))
	if err != nil {
		t.Fatal(err)
	}

	before := goroutineIDs()
	client, err := spire.Dial(testCtx, spireServer.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx)
	health := &app.Health{}
	done := make(chan error, 1)
	go func() { done <- app.RunStatic(ctx, app.ControllerContext{Config: cfg, SPIRE: client}, 2, health) }()
	if err := wait.PollUntilContextTimeout(testCtx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		entries, err := spireServer.EntryShow(ctx)
		rels, relErr := spireServer.FederationShow(ctx)
		return health.Ready() == nil && err == nil && relErr == nil && len(entries) == 1 && len(rels) == 1, nil
	}); err != nil {
		t.Fatalf("static mode did not converge: %v", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunStatic: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunStatic still running 30s after its context was cancelled")
	}
	_ = client.Close()
	expectNoLeakedGoroutines(t, before, 5*time.Second)
}
