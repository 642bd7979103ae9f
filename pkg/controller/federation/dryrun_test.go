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

package federation

import (
	"context"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// TestDryRunWritesNothing syncs a new resource and a conflicting one, which makes a create
// Event, a Conflict Event and two status updates, with and without DryRun: a dry run writes
// no status, records no Event to the API and, through spire.DryRun, leaves SPIRE alone.
func TestDryRunWritesNothing(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		t.Run(map[bool]string{false: "control", true: "dry run"}[dryRun], func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			t.Cleanup(cancel)

			owner := cftd("owner", time.Hour, webSpec("fed.org", "https://fed.org/"))
			loser := cftd("loser", time.Minute, webSpec("fed.org", "https://other.fed.org/"))
			kube := k8sfake.NewClientset()
			api := spirefake.NewSimpleClientset(owner, loser)
			server := spiretest.New(t)
			var spireClient spire.API = dial(ctx, t, server.SocketPath())
			if dryRun {
				spireClient = spire.DryRun(spireClient, nil)
			}

			factory := spireinformers.NewSharedInformerFactory(api, 0)
			c, err := NewController(ctx, factory.Spire().V1alpha1().ClusterFederatedTrustDomains(), kube, api, spireClient,
				Options{Options: fedreconciler.Options{TrustDomain: spiffeid.RequireTrustDomainFromString(spiretest.DefaultTrustDomain), DryRun: dryRun}, ResyncInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range []*spirev1alpha1.ClusterFederatedTrustDomain{owner, loser} {
				if err := c.cftdIndexer.Add(obj); err != nil {
					t.Fatal(err)
				}
			}
			c.events.Start()
			t.Cleanup(c.events.Shutdown)
			api.ClearActions()

			if err := c.fullResync(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.syncTrustDomain(ctx, "fed.org"); err != nil {
				t.Fatal(err)
			}

			statusUpdates := 0
			for _, a := range api.Actions() {
				if a.Matches("update", "clusterfederatedtrustdomains") && a.GetSubresource() == "status" {
					statusUpdates++
				}
			}
			events := func() int {
				n := 0
				for _, a := range kube.Actions() {
					if a.GetResource().Resource == "events" {
						n++
					}
				}
				return n
			}
			if !dryRun {
				if statusUpdates != 2 || len(server.Relationships()) != 1 {
					t.Fatalf("control run: %d status updates and %d relationships, want 2 and 1", statusUpdates, len(server.Relationships()))
				}
				// The broadcaster delivers asynchronously.
				if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
					return events() >= 2, nil
				}); err != nil {
					t.Fatalf("control run recorded %d Events, want a create and a conflict: %v", events(), err)
				}
				return
			}
			if statusUpdates != 0 {
				t.Errorf("dry run made %d status updates: %v", statusUpdates, api.Actions())
			}
			if n := len(server.Relationships()); n != 0 {
				t.Errorf("dry run left %d relationships in SPIRE", n)
			}
			if n := server.WriteCalls(); n != 0 {
				t.Errorf("dry run made %d SPIRE write calls", n)
			}
			// The control run's Events arrive within milliseconds; give them ample time.
			time.Sleep(500 * time.Millisecond)
			if n := events(); n != 0 {
				t.Errorf("dry run recorded %d Events to the API: %v", n, kube.Actions())
			}
		})
	}
}
