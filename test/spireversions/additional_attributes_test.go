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

// Package spireversions holds end-to-end tests of how spire-registrar meets SPIRE versions: what
// is new in 1.15, the server the official Helm chart runs, and an older entry API (1.13's),
// which a proxy in front of the 1.15 server emulates.
package spireversions

import (
	"context"
	"fmt"
	"testing"
	"time"

	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestUpdatesKeepAdditionalAttributes sets SPIRE 1.15's additional_attributes on an entry that
// spire-registrar manages, as an operator would, then changes the resource: spire-registrar's
// update must carry a mask naming only what it changes, so the attributes survive it.
func TestUpdatesKeepAdditionalAttributes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real kube-apiserver and spire-server; skipped with -short")
	}
	stack := realcluster.NewStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	runController(ctx, t, stack, stack.SPIRE.SocketPath())

	td := stack.SPIRE.TrustDomain()
	cse := &spirev1alpha1.ClusterStaticEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: spirev1alpha1.ClusterStaticEntrySpec{
			SPIFFEID:  "spiffe://" + td + "/db",
			ParentID:  "spiffe://" + td + "/spire/agent/x",
			Selectors: []string{"unix:uid:1000"},
			Hint:      "first",
		},
	}
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterStaticEntries().Create(ctx, cse, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	entries := entryClient(t, stack.SPIRE.SocketPath())
	entry := waitForEntry(ctx, t, entries, func(e *types.Entry) bool { return e.GetHint() == "first" })

	// The operator sets an attribute spire-registrar knows nothing of.
	resp, err := entries.BatchUpdateEntry(ctx, &entryv1.BatchUpdateEntryRequest{
		Entries: []*types.Entry{{Id: entry.GetId(), AdditionalAttributes: &types.Entry_AdditionalAttributes{
			DisableX509SvidPrefetch: true, JwtSvidIncludeJti: true}}},
		InputMask: &types.EntryMask{AdditionalAttributes: true},
	})
	if err != nil || codes.Code(resp.GetResults()[0].GetStatus().GetCode()) != codes.OK {
		t.Fatalf("setting additional_attributes: %v %v", err, resp.GetResults())
	}

	// Several full resyncs leave it alone, and so does an update of the resource.
	time.Sleep(5 * time.Second)
	latest, err := stack.SpireAPI.SpireV1alpha1().ClusterStaticEntries().Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	latest.Spec.Hint = "second"
	if _, err := stack.SpireAPI.SpireV1alpha1().ClusterStaticEntries().Update(ctx, latest, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := waitForEntry(ctx, t, entries, func(e *types.Entry) bool { return e.GetHint() == "second" })
	if updated.GetId() != entry.GetId() {
		t.Errorf("the entry was replaced (%s → %s), not updated", entry.GetId(), updated.GetId())
	}
	attrs := updated.GetAdditionalAttributes()
	if !attrs.GetDisableX509SvidPrefetch() || !attrs.GetJwtSvidIncludeJti() {
		t.Errorf("additional_attributes after spire-registrar's update: %v, want both set", attrs)
	}
}

// runController runs spire-registrar's controllers in-process, as the binary does, with a 2s
// gcInterval, on the SPIRE API served at socket, until the test ends.
func runController(ctx context.Context, t *testing.T, stack *realcluster.Stack, socket string) {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `
apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: %s
clusterName: test
spireServerSocketPath: %s
gcInterval: 2s
`, stack.SPIRE.TrustDomain(), socket))
	if err != nil {
		t.Fatal(err)
	}
	client, err := spire.Dial(ctx, cfg.SPIREServerSocketPath)
	if err != nil {
		t.Fatal(err)
	}
	kubeInformers, spireInformers := app.NewInformerFactories(stack.Client, stack.SpireAPI)
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- app.Run(runCtx, app.ControllerContext{Config: cfg, KubeClient: stack.Client, SpireAPIClient: stack.SpireAPI,
			KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: client}, 2, nil)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-runErr; err != nil {
			t.Errorf("app.Run: %v", err)
		}
		_ = client.Close()
	})
}

// entryClient is SPIRE's own entry API, without output masks: the oracle.
func entryClient(t *testing.T, socket string) entryv1.EntryClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return entryv1.NewEntryClient(conn)
}

// waitForEntry polls SPIRE's entries until exactly one is there and matches.
func waitForEntry(ctx context.Context, t *testing.T, entries entryv1.EntryClient, match func(*types.Entry) bool) *types.Entry {
	t.Helper()
	var found *types.Entry
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := entries.ListEntries(ctx, &entryv1.ListEntriesRequest{})
		if err != nil || len(resp.GetEntries()) != 1 {
			return false, nil
		}
		found = resp.GetEntries()[0]
		return match(found), nil
	})
	if err != nil {
		t.Fatalf("waiting for the entry: %v (last seen %v)", err, found)
	}
	return found
}
