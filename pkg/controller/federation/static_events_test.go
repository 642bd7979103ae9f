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
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// TestStaticModeLogsEvents: in static mode there is no kube client, so the log is the only
// place a user reads Events. They appear at the default verbosity, as the entry controller's
// do (both go through runner.NewEvents): the reconciler's create Event and the controller's
// Conflict Event alike.
func TestStaticModeLogsEvents(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0), ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	t.Cleanup(cancel)

	server := spiretest.New(t)
	client := dial(ctx, t, server.SocketPath())

	// Static mode feeds the informer from files; a fake clientset stands in for them here.
	factory := spireinformers.NewSharedInformerFactory(spirefake.NewSimpleClientset(), 0)
	c, err := NewController(ctx, factory.Spire().V1alpha1().ClusterFederatedTrustDomains(), nil, nil, client,
		Options{Options: fedreconciler.Options{TrustDomain: spiffeid.RequireTrustDomainFromString(spiretest.DefaultTrustDomain)}, ResyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []*spirev1alpha1.ClusterFederatedTrustDomain{
		cftd("owner", time.Hour, webSpec("fed.org", "https://fed.org/")),
		cftd("loser", time.Minute, webSpec("fed.org", "https://other.fed.org/")),
	} {
		if err := c.cftdIndexer.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	c.events.Start()
	t.Cleanup(c.events.Shutdown)

	if err := c.fullResync(ctx); err != nil {
		t.Fatal(err)
	}
	buffer := logger.GetSink().(ktesting.Underlier).GetBuffer()
	eventLogged := func(reason string) bool {
		for line := range strings.Lines(buffer.String()) {
			if strings.Contains(line, "Event occurred") && strings.Contains(line, `reason="`+reason+`"`) {
				return true
			}
		}
		return false
	}
	for _, reason := range []string{spirev1alpha1.ReasonRelationshipCreated, spirev1alpha1.ReasonFederationConflict} {
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return eventLogged(reason), nil
		}); err != nil {
			t.Errorf("no %s Event in the log at verbosity 0", reason)
		}
	}
}
