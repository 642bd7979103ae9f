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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
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

// TestConfigNarrowsTheInformers checks what the controllers' informers hold when the config
// narrows them: ClusterSPIFFEIDs by the class label and clusterSPIFFEIDLabelSelector, pods by
// cacheNamespace(s) and their selectors.
func TestConfigNarrowsTheInformers(t *testing.T) {
	objects := func() (*k8sfake.Clientset, *spirefake.Clientset) {
		pod := func(ns, name string, labels map[string]string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
		}
		labelledClusterSPIFFEID := func(name string, labels map[string]string) *spirev1alpha1.ClusterSPIFFEID {
			return &spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		}
		return k8sfake.NewClientset(pod("apps", "a", map[string]string{"spiffe": "on"}), pod("apps", "b", nil), pod("web", "c", nil)),
			spirefake.NewSimpleClientset(labelledClusterSPIFFEID("mine", map[string]string{"spire.spiffe.io/class-name": "blue", "tier": "1"}),
				labelledClusterSPIFFEID("other-class", map[string]string{"spire.spiffe.io/class-name": "red", "tier": "1"}), labelledClusterSPIFFEID("classless", nil))
	}
	for _, tc := range []struct {
		name                 string
		config               string
		wantPods             []string
		wantClusterSPIFFEIDs []string
	}{
		{"nothing narrowed", "", []string{"apps/a", "apps/b", "web/c"}, []string{"classless", "mine", "other-class"}},
		{"filterByClassName", "className: blue\nfilterByClassName: true\n", []string{"apps/a", "apps/b", "web/c"}, []string{"mine"}},
		{"label selector", "clusterSPIFFEIDLabelSelector: {tier: \"1\"}\n", []string{"apps/a", "apps/b", "web/c"}, []string{"mine", "other-class"}},
		{"one namespace", "cacheNamespace: apps\n", []string{"apps/a", "apps/b"}, []string{"classless", "mine", "other-class"}},
		{"one namespace with a selector", "cacheNamespaces: {apps: {labelSelectors: {spiffe: \"on\"}}}\n", []string{"apps/a"}, []string{"classless", "mine", "other-class"}},
		// Several namespaces keep a cluster-wide watch; the controllers ignore the others.
		{"several namespaces", "cacheNamespaces: {apps: {}, other: {}}\n", []string{"apps/a", "apps/b", "web/c"}, []string{"classless", "mine", "other-class"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\n" + tc.config))
			if err != nil {
				t.Fatal(err)
			}
			kubeClient, spireClient := objects()
			ctx, cancel := context.WithCancel(context.Background())
			kubeInformers, spireInformers := NewInformerFactories(kubeClient, spireClient)
			if _, err := NewControllers(ctx, ControllerContext{Config: cfg, KubeClient: kubeClient,
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
			kubeInformers.WaitForCacheSync(ctx.Done())
			spireInformers.WaitForCacheSync(ctx.Done())
			var pods, clusterSPIFFEIDs []string
			for _, obj := range kubeInformers.Core().V1().Pods().Informer().GetStore().List() {
				pods = append(pods, obj.(*corev1.Pod).Namespace+"/"+obj.(*corev1.Pod).Name)
			}
			for _, obj := range spireInformers.Spire().V1alpha1().ClusterSPIFFEIDs().Informer().GetStore().List() {
				clusterSPIFFEIDs = append(clusterSPIFFEIDs, obj.(*spirev1alpha1.ClusterSPIFFEID).Name)
			}
			slices.Sort(pods)
			slices.Sort(clusterSPIFFEIDs)
			if diff := cmp.Diff(tc.wantPods, pods); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantClusterSPIFFEIDs, clusterSPIFFEIDs); diff != "" {
				t.Errorf("ClusterSPIFFEIDs (-want +got):\n%s", diff)
			}
		})
	}
}
