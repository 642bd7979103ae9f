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
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestTwoClassesShareOneServer runs two controllers of different classes against one real
// SPIRE server, as two spire-registrar deployments sharing it would: each creates the
// relationships of its own resources, neither deletes the other's (nor one created by hand),
// and deleting a resource removes only its own relationship.
func TestTwoClassesShareOneServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server")
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	stack := realcluster.NewStack(t)
	spireServer, kubeClient, spireAPI := stack.SPIRE, stack.Client, stack.SpireAPI
	client := dial(ctx, t, spireServer.SocketPath())

	// A relationship of a third owner, made with SPIRE's own CLI.
	if out, err := spireServer.CLI(ctx, "federation create", "-trustDomain", "manual.org",
		"-bundleEndpointURL", "https://manual.org/bundle", "-bundleEndpointProfile", "https_web"); err != nil {
		t.Fatalf("federation create: %v\n%s", err, out)
	}

	factory := spireinformers.NewSharedInformerFactory(spireAPI, 0)
	var controllers []*Controller
	for _, class := range []string{"blue", "red"} {
		c, err := NewController(ctx, factory.Spire().V1alpha1().ClusterFederatedTrustDomains(), kubeClient, spireAPI, client, Options{
			Options: fedreconciler.Options{
				TrustDomain:  spiffeid.RequireTrustDomainFromString(spireServer.TrustDomain()),
				Class:        config.Class{Name: class},
				SharedServer: true,
			},
			ResyncInterval: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		controllers = append(controllers, c)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, c := range controllers {
		wg.Go(func() { c.Run(ctx, 2) })
	}
	defer func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}()

	expect := func(what string, want ...string) {
		t.Helper()
		var got []string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			rels, err := spireServer.FederationShow(ctx)
			if err != nil {
				return false, nil
			}
			got = nil
			for _, r := range rels {
				got = append(got, r.TrustDomain)
			}
			slices.Sort(got)
			return slices.Equal(got, want), nil
		})
		if err != nil {
			t.Fatalf("%s: SPIRE holds %v, want %v", what, got, want)
		}
	}
	api := spireAPI.SpireV1alpha1().ClusterFederatedTrustDomains()
	for _, class := range []string{"blue", "red"} {
		obj := cftd(class, 0, webSpec(class+".org", "https://"+class+".org/bundle"))
		obj.ObjectMeta = metav1.ObjectMeta{Name: class}
		obj.Spec.ClassName = class
		if _, err := api.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect("both classes' relationships created", "blue.org", "manual.org", "red.org")
	// Several full resyncs of both controllers (every second) delete nothing.
	time.Sleep(3 * time.Second)
	expect("after full resyncs", "blue.org", "manual.org", "red.org")

	if err := api.Delete(ctx, "blue", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("blue's resource deleted", "manual.org", "red.org")
	time.Sleep(2 * time.Second)
	expect("after more full resyncs", "manual.org", "red.org")
}
