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

package app

import (
	"context"
	"reflect"
	"slices"
	"testing"

	k8sfake "k8s.io/client-go/kubernetes/fake"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// TestControllersRegisterOnlyTheInformersTheyRead checks what each reconcile setting makes
// the binary watch: with ClusterSPIFFEIDs off, no pod (or namespace, node, EndpointSlice)
// informer exists, so a cluster's pods are neither listed nor cached.
func TestControllersRegisterOnlyTheInformersTheyRead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reconcile string
		wantKube  []string
		wantSpire []string
	}{
		{"everything", "", []string{"*v1.EndpointSlice", "*v1.Namespace", "*v1.Node", "*v1.Pod"},
			[]string{"*v1alpha1.ClusterFederatedTrustDomain", "*v1alpha1.ClusterSPIFFEID", "*v1alpha1.ClusterStaticEntry"}},
		{"static entries only", "reconcile: {clusterStaticEntries: true}\n", nil,
			[]string{"*v1alpha1.ClusterStaticEntry"}},
		{"federation only", "reconcile: {clusterFederatedTrustDomains: true}\n", nil,
			[]string{"*v1alpha1.ClusterFederatedTrustDomain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\n" + tc.reconcile))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			kubeInformers, spireInformers := NewInformerFactories(k8sfake.NewClientset(), spirefake.NewSimpleClientset())
			// Constructing touches no server: a client that is never called will do.
			if _, err := NewControllers(ctx, ControllerContext{Config: cfg, KubeClient: k8sfake.NewClientset(),
				KubeInformers: kubeInformers, SpireInformers: spireInformers, SPIRE: spire.New(nil)}); err != nil {
				t.Fatal(err)
			}
			kubeInformers.Start(ctx.Done())
			spireInformers.Start(ctx.Done())
			defer func() {
				cancel()
				kubeInformers.Shutdown()
				spireInformers.Shutdown()
			}()
			if got := typeNames(kubeInformers.WaitForCacheSync(ctx.Done())); !slices.Equal(got, tc.wantKube) {
				t.Errorf("Kubernetes informers = %v, want %v", got, tc.wantKube)
			}
			if got := typeNames(spireInformers.WaitForCacheSync(ctx.Done())); !slices.Equal(got, tc.wantSpire) {
				t.Errorf("spire.spiffe.io informers = %v, want %v", got, tc.wantSpire)
			}
		})
	}
}

func typeNames(synced map[reflect.Type]bool) []string {
	var names []string
	for t := range synced {
		names = append(names, t.String())
	}
	slices.Sort(names)
	return names
}
