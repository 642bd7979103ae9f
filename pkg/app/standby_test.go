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
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// warmCaches is what a pair of started factories caches: the informer types, and the pods and
// ClusterSPIFFEIDs they hold (which show the narrowing).
type warmCaches struct {
	Kube, Spire, Pods, ClusterSPIFFEIDs []string
}

// TestWarmInformersAreTheControllers checks that a standby caches exactly what the leader's
// controllers read, narrowed the same way, and that the controllers, constructed on the warm
// factories when leadership comes, need no informer the standby did not start.
func TestWarmInformersAreTheControllers(t *testing.T) {
	for _, tc := range []struct{ name, config string }{
		{"everything", ""},
		{"static entries only", "reconcile: {clusterStaticEntries: true}\n"},
		{"federation only", "reconcile: {clusterFederatedTrustDomains: true}\n"},
		{"narrowed", "cacheNamespaces: {apps: {labelSelectors: {spiffe: \"on\"}}}\nclusterSPIFFEIDLabelSelector: {tier: \"1\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\n" + tc.config))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			caches := func(construct func(ControllerContext)) (ControllerContext, warmCaches) {
				kubeClient := k8sfake.NewClientset(
					&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "a", Labels: map[string]string{"spiffe": "on"}}},
					&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "b"}})
				spireClient := spirefake.NewSimpleClientset(
					&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "tier-1", Labels: map[string]string{"tier": "1"}}},
					&spirev1alpha1.ClusterSPIFFEID{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
				cc := ControllerContext{Config: cfg, KubeClient: kubeClient, SpireAPIClient: spireClient, SPIRE: spire.New(nil)}
				cc.KubeInformers, cc.SpireInformers = NewInformerFactories(kubeClient, spireClient)
				construct(cc)
				t.Cleanup(func() {
					cancel()
					cc.KubeInformers.Shutdown()
					cc.SpireInformers.Shutdown()
				})
				return cc, started(ctx, cc)
			}
			newControllers := func(cc ControllerContext) {
				if _, err := NewControllers(ctx, cc); err != nil {
					t.Fatal(err)
				}
			}
			_, leader := caches(newControllers)
			standbyContext, standby := caches(func(cc ControllerContext) { warmInformers(cc) })
			if diff := cmp.Diff(leader, standby); diff != "" {
				t.Errorf("standby caches differ from the controllers' (-controllers +standby):\n%s", diff)
			}
			newControllers(standbyContext)
			if diff := cmp.Diff(standby, started(ctx, standbyContext)); diff != "" {
				t.Errorf("the controllers asked for informers the standby did not start (-standby +after):\n%s", diff)
			}
		})
	}
}

// started starts cc's factories (again: only informers not yet started start) and returns what
// they cache once synced.
func started(ctx context.Context, cc ControllerContext) warmCaches {
	cc.KubeInformers.Start(ctx.Done())
	cc.SpireInformers.Start(ctx.Done())
	c := warmCaches{
		Kube:  typeNames(cc.KubeInformers.WaitForCacheSync(ctx.Done())),
		Spire: typeNames(cc.SpireInformers.WaitForCacheSync(ctx.Done())),
	}
	if slices.Contains(c.Kube, "*v1.Pod") {
		for _, obj := range cc.KubeInformers.Core().V1().Pods().Informer().GetStore().List() {
			pod := obj.(*corev1.Pod)
			c.Pods = append(c.Pods, pod.Namespace+"/"+pod.Name)
		}
	}
	if slices.Contains(c.Spire, "*v1alpha1.ClusterSPIFFEID") {
		for _, obj := range cc.SpireInformers.Spire().V1alpha1().ClusterSPIFFEIDs().Informer().GetStore().List() {
			c.ClusterSPIFFEIDs = append(c.ClusterSPIFFEIDs, obj.(*spirev1alpha1.ClusterSPIFFEID).Name)
		}
	}
	slices.Sort(c.Pods)
	slices.Sort(c.ClusterSPIFFEIDs)
	return c
}

// TestStandbyOnlyReads runs a replica while another holds the Lease: it fills its caches,
// stays ready, and only reads. No controller runs, nothing is written to the API (not status,
// not an Event, not the Lease) and SPIRE is never called: its client would panic.
func TestStandbyOnlyReads(t *testing.T) {
	cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LeaderElection = config.LeaderElection{Enabled: true, ResourceName: "spire-registrar", ResourceNamespace: "default",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 50 * time.Millisecond}
	now := metav1.NewMicroTime(time.Now())
	kubeClient := k8sfake.NewClientset(
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "spire-registrar"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](15),
				AcquireTime: &now, RenewTime: &now}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "a", UID: "uid-a"}, Spec: corev1.PodSpec{NodeName: "node-1"}})
	spireClient := spirefake.NewSimpleClientset(&spirev1alpha1.ClusterSPIFFEID{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       spirev1alpha1.ClusterSPIFFEIDSpec{SPIFFEIDTemplate: "spiffe://example.org/pod/{{ .PodMeta.Name }}"}})
	cc := ControllerContext{Config: cfg, KubeClient: kubeClient, SpireAPIClient: spireClient, SPIRE: spire.New(nil)}
	cc.KubeInformers, cc.SpireInformers = NewInformerFactories(kubeClient, spireClient)
	health := &Health{}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := runWarmStandby(ctx, cc, 1, health); err != nil {
		t.Fatal(err)
	}
	if !cc.KubeInformers.Core().V1().Pods().Informer().HasSynced() {
		t.Errorf("the standby's pod informer never synced")
	}
	if err := health.Ready(); err != nil {
		t.Errorf("standby not ready: %v", err)
	}
	if len(health.controllers) != 0 {
		t.Errorf("a standby constructed controllers")
	}
	var writes []string
	for _, a := range append(kubeClient.Actions(), spireClient.Actions()...) {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	if len(writes) > 0 {
		t.Errorf("the standby wrote: %v", writes)
	}
}

// TestWarmInformersCanListAgain: every informer a new leader waits for can be made to list
// again, so that a quiet one catches up with the Lease in seconds rather than at the next
// bookmark.
func TestWarmInformersCanListAgain(t *testing.T) {
	cfg, err := config.Parse([]byte("trustDomain: example.org\nclusterName: c\nreconcile: {clusterSPIFFEIDs: true, clusterStaticEntries: true, clusterFederatedTrustDomains: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	kubeClient, spireClient := k8sfake.NewClientset(), spirefake.NewSimpleClientset()
	cc := ControllerContext{Config: cfg, KubeClient: kubeClient, SpireAPIClient: spireClient, SPIRE: spire.New(nil)}
	cc.KubeInformers, cc.SpireInformers = NewInformerFactories(kubeClient, spireClient)
	watched := warmInformers(cc)
	var names []string
	for _, w := range watched {
		names = append(names, w.name)
		if _, ok := w.informer.(interface{ Relist() }); !ok {
			t.Errorf("the %s informer (%T) cannot list again", w.name, w.informer)
		}
	}
	if len(watched) != 7 {
		t.Errorf("waits for %v, want the 7 informers the controllers read", names)
	}
}
