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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// plannedCreates reads a --dry-run-output file and returns its creates as "entry <SPIFFE ID>"
// and "federationRelationship <trust domain>", sorted.
func plannedCreates(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var creates []string
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		var w spire.PlannedWrite
		if err := json.Unmarshal(scanner.Bytes(), &w); err != nil {
			t.Fatalf("plan line %q is not JSON: %v", scanner.Text(), err)
		}
		if w.Op != spire.OpCreate {
			continue
		}
		switch w.Kind {
		case spire.KindEntry:
			var e types.Entry
			if err := protojson.Unmarshal(w.Entry, &e); err != nil {
				t.Fatalf("planned entry %s: %v", w.Entry, err)
			}
			creates = append(creates, "entry spiffe://"+e.GetSpiffeId().GetTrustDomain()+e.GetSpiffeId().GetPath())
		case spire.KindFederationRelationship:
			var r types.FederationRelationship
			if err := protojson.Unmarshal(w.Relationship, &r); err != nil {
				t.Fatalf("planned relationship %s: %v", w.Relationship, err)
			}
			creates = append(creates, "federationRelationship "+r.GetTrustDomain())
		}
	}
	slices.Sort(creates)
	return creates
}

// TestDryRunWritesNothingAnywhere runs the binary with --dry-run and --dry-run-output on a
// cluster where a ClusterSPIFFEID selects a pod, a ClusterStaticEntry and a
// ClusterFederatedTrustDomain exist: the plan file holds the three creates, and nothing is
// written anywhere: no SPIRE entry or relationship, no status on the three resources, no
// Event in the cluster.
func TestDryRunWritesNothingAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	bin := realcluster.RegistrarBinary(t)
	stack := realcluster.NewStack(t)
	kube, spireServer, client, spireAPI := stack.Kube, stack.SPIRE, stack.Client, stack.SpireAPI
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
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://{{ .TrustDomain }}/pod/{{ .PodMeta.Name }}"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterStaticEntries().Create(ctx, &spirev1alpha1.ClusterStaticEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/db",
			ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:999"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := spireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().Create(ctx, &spirev1alpha1.ClusterFederatedTrustDomain{
		ObjectMeta: metav1.ObjectMeta{Name: "partner"},
		Spec: spirev1alpha1.ClusterFederatedTrustDomainSpec{TrustDomain: "partner.org", BundleEndpointURL: "https://127.0.0.1:1/bundle",
			BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSWebProfileType}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	plan := filepath.Join(t.TempDir(), "plan.jsonl")
	config := writeFile(t, "trustDomain: example.org\nclusterName: it\nclusterDomain: cluster.local\nspireServerSocketPath: "+spireServer.SocketPath()+"\n")
	var logs realcluster.SyncBuffer
	cmd := exec.Command(bin, "--kubeconfig", kube.Kubeconfig(), "--config", config, "--dry-run", "--dry-run-output", plan, "-v=2")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("spire-registrar output:\n%s", logs.String())
		}
	}()

	want := []string{"entry spiffe://example.org/db", "entry spiffe://example.org/pod/web", "federationRelationship partner.org"}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return cmp.Equal(want, plannedCreates(t, plan)), nil
	}); err != nil {
		t.Fatalf("planned creates (-want +got):\n%s", cmp.Diff(want, plannedCreates(t, plan)))
	}
	// Status and Events follow the writes within the controllers' sync; give them time to
	// appear if the controllers wrote them.
	time.Sleep(3 * time.Second)

	if entries, err := spireServer.EntryShow(ctx); err != nil || len(entries) != 0 {
		t.Errorf("SPIRE entries after a dry run: %+v (err %v)", entries, err)
	}
	if rels, err := spireServer.FederationShow(ctx); err != nil || len(rels) != 0 {
		t.Errorf("SPIRE federation relationships after a dry run: %+v (err %v)", rels, err)
	}
	clusterSPIFFEID, err := spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spirev1alpha1.ClusterSPIFFEIDStatus{}, clusterSPIFFEID.Status); diff != "" {
		t.Errorf("ClusterSPIFFEID status written in a dry run (-want +got):\n%s", diff)
	}
	cse, err := spireAPI.SpireV1alpha1().ClusterStaticEntries().Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spirev1alpha1.ClusterStaticEntryStatus{}, cse.Status); diff != "" {
		t.Errorf("ClusterStaticEntry status written in a dry run (-want +got):\n%s", diff)
	}
	cftd, err := spireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().Get(ctx, "partner", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spirev1alpha1.ClusterFederatedTrustDomainStatus{}, cftd.Status); diff != "" {
		t.Errorf("ClusterFederatedTrustDomain status written in a dry run (-want +got):\n%s", diff)
	}
	events, err := client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		// kube-apiserver's own IP repair loop may report on the kubernetes Service, about
		// which spire-registrar records nothing.
		if e.InvolvedObject.Kind == "Service" && e.InvolvedObject.Namespace == metav1.NamespaceDefault &&
			e.InvolvedObject.Name == "kubernetes" {
			continue
		}
		t.Errorf("Event in a dry run: %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
}
