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

package entry

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	spirefake "github.com/spire-registrar/spire-registrar/generated/clientset/versioned/fake"
	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// newHandlerTestController builds a controller whose informers are never started: objects
// are put straight into their stores, and the tests call the handlers and read the queues.
func newHandlerTestController(t *testing.T, objects ...runtime.Object) *Controller {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	kubeInformers := informers.NewSharedInformerFactory(k8sfake.NewClientset(), 0)
	spireInformers := spireinformers.NewSharedInformerFactory(spirefake.NewSimpleClientset(), 0)
	pods, namespaces, nodes := kubeInformers.Core().V1().Pods(), kubeInformers.Core().V1().Namespaces(), kubeInformers.Core().V1().Nodes()
	slices := kubeInformers.Discovery().V1().EndpointSlices()
	c, err := NewController(ctx, pods, namespaces, nodes, slices,
		spireInformers.Spire().V1alpha1().ClusterSPIFFEIDs(), spireInformers.Spire().V1alpha1().ClusterStaticEntries(),
		nil, nil, nil, nil, Options{
			Settings: render.Settings{
				TrustDomain:      spiffeid.RequireTrustDomainFromString("example.org"),
				ParentIDTemplate: "spiffe://{{ .TrustDomain }}/k8s-node/{{ .NodeMeta.Name }}",
			},
			ResyncInterval: time.Hour,
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.podQueue.ShutDown()
		c.clusterSPIFFEIDs.fanOut.ShutDown()
		c.clusterSPIFFEIDs.status.queue.ShutDown()
		c.clusterStaticEntries.queue.ShutDown()
	})
	for _, obj := range objects {
		var err error
		switch o := obj.(type) {
		case *corev1.Pod:
			err = pods.Informer().GetIndexer().Add(o)
		case *corev1.Namespace:
			err = namespaces.Informer().GetIndexer().Add(o)
		case *corev1.Node:
			err = nodes.Informer().GetIndexer().Add(o)
		case *discoveryv1.EndpointSlice:
			err = slices.Informer().GetIndexer().Add(o)
		default:
			t.Fatalf("unexpected object %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// queued drains a queue and returns its keys, sorted.
func queued[T interface{ ~string }](q workqueue.TypedRateLimitingInterface[T]) []T {
	var out []T
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		q.Forget(k)
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func withRV[T metav1.Object](obj T, rv string) T {
	obj.SetResourceVersion(rv)
	return obj
}

func TestOnPodUpdate(t *testing.T) {
	base := func() *corev1.Pod {
		p := pod("production", "web", "node-1", map[string]string{"app": "web"})
		p.ResourceVersion = "1"
		p.Status.Phase = corev1.PodRunning
		return p
	}
	for _, tc := range []struct {
		name   string
		update func(*corev1.Pod)
		want   []ktypes.UID
	}{
		{name: "resync of an unchanged pod", update: func(p *corev1.Pod) {}},
		{name: "status conditions only", update: func(p *corev1.Pod) {
			p.ResourceVersion = "2"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}},
		{name: "phase", want: []ktypes.UID{"uid-production-web"}, update: func(p *corev1.Pod) {
			p.ResourceVersion = "2"
			p.Status.Phase = corev1.PodSucceeded
		}},
		{name: "labels", want: []ktypes.UID{"uid-production-web"}, update: func(p *corev1.Pod) {
			p.ResourceVersion = "2"
			p.Labels["app"] = "api"
		}},
		{name: "annotations", want: []ktypes.UID{"uid-production-web"}, update: func(p *corev1.Pod) {
			p.ResourceVersion = "2"
			p.Annotations = map[string]string{"id": "x"}
		}},
		{name: "spec (scheduled to a node)", want: []ktypes.UID{"uid-production-web"}, update: func(p *corev1.Pod) {
			p.ResourceVersion = "2"
			p.Spec.NodeName = "node-2"
		}},
		{name: "owner references", want: []ktypes.UID{"uid-production-web"}, update: func(p *corev1.Pod) {
			p.ResourceVersion = "2"
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1", UID: "rs"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHandlerTestController(t)
			oldPod, newPod := base(), base()
			tc.update(newPod)
			c.onPodUpdate(oldPod, newPod)
			if diff := cmp.Diff(tc.want, queued(c.podQueue)); diff != "" {
				t.Errorf("pods queued (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnNamespaceUpdate(t *testing.T) {
	objects := []runtime.Object{
		pod("production", "web", "node-1", nil), pod("production", "api", "node-2", nil), pod("staging", "web", "node-1", nil),
	}
	for _, tc := range []struct {
		name   string
		update func(*corev1.Namespace)
		want   []ktypes.UID
	}{
		{name: "annotations only", update: func(ns *corev1.Namespace) { ns.Annotations = map[string]string{"a": "b"} }},
		{name: "status only", update: func(ns *corev1.Namespace) { ns.Status.Phase = corev1.NamespaceTerminating }},
		{name: "labels: every pod of the namespace", want: []ktypes.UID{"uid-production-api", "uid-production-web"},
			update: func(ns *corev1.Namespace) { ns.Labels["env"] = "prod" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHandlerTestController(t, objects...)
			oldNS := withRV(namespace("production", map[string]string{"env": "production"}), "1")
			newNS := withRV(namespace("production", map[string]string{"env": "production"}), "2")
			tc.update(newNS)
			c.onNamespaceUpdate(testLogger(t))(oldNS, newNS)
			if diff := cmp.Diff(tc.want, queued(c.podQueue)); diff != "" {
				t.Errorf("pods queued (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnNodeUpdate(t *testing.T) {
	objects := []runtime.Object{
		pod("production", "web", "node-1", nil), pod("production", "api", "node-2", nil), pod("staging", "web", "node-1", nil),
	}
	for _, tc := range []struct {
		name   string
		update func(*corev1.Node)
		want   []ktypes.UID
	}{
		{name: "heartbeat (status only)", update: func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		}},
		{name: "labels: every pod on the node", want: []ktypes.UID{"uid-production-web", "uid-staging-web"},
			update: func(n *corev1.Node) { n.Labels = map[string]string{"zone": "a"} }},
		{name: "annotations", want: []ktypes.UID{"uid-production-web", "uid-staging-web"},
			update: func(n *corev1.Node) { n.Annotations = map[string]string{"a": "b"} }},
		{name: "spec", want: []ktypes.UID{"uid-production-web", "uid-staging-web"},
			update: func(n *corev1.Node) { n.Spec.Unschedulable = true }},
		{name: "recreated under the same name", want: []ktypes.UID{"uid-production-web", "uid-staging-web"},
			update: func(n *corev1.Node) { n.UID = "uid-node-1-again" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHandlerTestController(t, objects...)
			oldNode, newNode := withRV(node("node-1"), "1"), withRV(node("node-1"), "2")
			tc.update(newNode)
			c.onNodeUpdate(testLogger(t))(oldNode, newNode)
			if diff := cmp.Diff(tc.want, queued(c.podQueue)); diff != "" {
				t.Errorf("pods queued (-want +got):\n%s", diff)
			}
		})
	}
}

func slice(name, service string, pods ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: name, ResourceVersion: "1",
		Labels: map[string]string{discoveryv1.LabelServiceName: service}}}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "production", Name: p}})
	}
	return s
}

// TestOnEndpointSliceUpdate follows the endpointslice controller's test of the same name:
// which slice updates lead to which pods being synced.
func TestOnEndpointSliceUpdate(t *testing.T) {
	objects := []runtime.Object{
		pod("production", "a", "node-1", nil), pod("production", "b", "node-1", nil), pod("production", "c", "node-1", nil),
	}
	for _, tc := range []struct {
		name     string
		old, new *discoveryv1.EndpointSlice
		want     []ktypes.UID
	}{
		{name: "readiness flip changes no DNS name", old: slice("s", "web", "a", "b"),
			new: func() *discoveryv1.EndpointSlice {
				s := slice("s", "web", "a", "b")
				ready := false
				s.Endpoints[0].Conditions.Ready = &ready
				s.ResourceVersion = "2"
				return s
			}()},
		{name: "pod added: old and new targets", old: slice("s", "web", "a"), new: withRV(slice("s", "web", "a", "b"), "2"),
			want: []ktypes.UID{"uid-production-a", "uid-production-b"}},
		{name: "pod removed: old and new targets", old: slice("s", "web", "a", "b"), new: withRV(slice("s", "web", "b"), "2"),
			want: []ktypes.UID{"uid-production-a", "uid-production-b"}},
		{name: "Service changed", old: slice("s", "web", "c"), new: withRV(slice("s", "api", "c"), "2"),
			want: []ktypes.UID{"uid-production-c"}},
		{name: "target not in the cache", old: slice("s", "web"), new: withRV(slice("s", "web", "gone"), "2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHandlerTestController(t, objects...)
			c.onSliceUpdate(tc.old, tc.new)
			if diff := cmp.Diff(tc.want, queued(c.podQueue)); diff != "" {
				t.Errorf("pods queued (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnClusterSPIFFEIDUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		update func(*spirev1alpha1.ClusterSPIFFEID)
		want   []string
	}{
		{name: "our own status write", update: func(c *spirev1alpha1.ClusterSPIFFEID) { c.Status.Stats.PodsSelected = 3 }},
		{name: "labels only", update: func(c *spirev1alpha1.ClusterSPIFFEID) { c.Labels = map[string]string{"a": "b"} }},
		{name: "spec (new generation)", want: []string{"web"}, update: func(c *spirev1alpha1.ClusterSPIFFEID) {
			c.Generation = 2
			c.Spec.Hint = "web"
		}},
		{name: "recreated under the same name", want: []string{"web"}, update: func(c *spirev1alpha1.ClusterSPIFFEID) { c.UID = "uid-web-again" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHandlerTestController(t)
			oldObj := withRV(clusterSPIFFEID("web", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{}), "1")
			newObj := withRV(oldObj.DeepCopy(), "2")
			tc.update(newObj)
			c.clusterSPIFFEIDs.eventHandler().OnUpdate(oldObj, newObj)
			if diff := cmp.Diff(tc.want, queued(c.clusterSPIFFEIDs.fanOut)); diff != "" {
				t.Errorf("ClusterSPIFFEIDs queued for fan-out (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnClusterStaticEntryUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		update func(*spirev1alpha1.ClusterStaticEntry)
		want   []string
	}{
		{name: "our own status write", update: func(e *spirev1alpha1.ClusterStaticEntry) { e.Status.Set = true }},
		{name: "spec (new generation)", want: []string{"db"}, update: func(e *spirev1alpha1.ClusterStaticEntry) {
			e.Generation = 2
			e.Spec.Hint = "db"
		}},
		{name: "recreated under the same name", want: []string{"db"}, update: func(e *spirev1alpha1.ClusterStaticEntry) { e.UID = "uid-db-again" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newHandlerTestController(t)
			oldObj := &spirev1alpha1.ClusterStaticEntry{ObjectMeta: metav1.ObjectMeta{Name: "db", UID: "uid-db", Generation: 1, ResourceVersion: "1"}}
			newObj := withRV(oldObj.DeepCopy(), "2")
			tc.update(newObj)
			c.onClusterStaticEntryUpdate(oldObj, newObj)
			if diff := cmp.Diff(tc.want, queued(c.clusterStaticEntries.queue)); diff != "" {
				t.Errorf("ClusterStaticEntries queued (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeleteEventsEnqueueTombstones: a delete seen late arrives as a tombstone; its object
// still names what to sync.
func TestDeleteEventsEnqueueTombstones(t *testing.T) {
	c := newHandlerTestController(t)
	c.enqueuePod(cacheTombstone(pod("production", "web", "node-1", nil)))
	c.clusterSPIFFEIDs.enqueue(cacheTombstone(clusterSPIFFEID("web", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{})))
	if diff := cmp.Diff([]ktypes.UID{"uid-production-web"}, queued(c.podQueue)); diff != "" {
		t.Errorf("pods queued (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"web"}, queued(c.clusterSPIFFEIDs.fanOut)); diff != "" {
		t.Errorf("ClusterSPIFFEIDs queued (-want +got):\n%s", diff)
	}
}

func cacheTombstone(obj runtime.Object) cache.DeletedFinalStateUnknown {
	return cache.DeletedFinalStateUnknown{Key: "tombstone", Obj: obj}
}

func testLogger(t *testing.T) klog.Logger {
	logger, _ := ktesting.NewTestContext(t)
	return logger
}

// The objects of the informers' initial lists are the initial full resync's to declare: they
// queue no pod sync (only each ClusterSPIFFEID's status), while what arrives afterwards does.
func TestInitialListQueuesNoPodSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kube := k8sfake.NewClientset(namespace("shop", nil), node("n1"), pod("shop", "old", "n1", nil),
		slice("web-abc", "web", "old"))
	spire := spirefake.NewSimpleClientset(clusterSPIFFEID("web", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{}))
	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	spireInformers := spireinformers.NewSharedInformerFactory(spire, 0)
	c, err := NewController(ctx, kubeInformers.Core().V1().Pods(), kubeInformers.Core().V1().Namespaces(),
		kubeInformers.Core().V1().Nodes(), kubeInformers.Discovery().V1().EndpointSlices(),
		spireInformers.Spire().V1alpha1().ClusterSPIFFEIDs(), spireInformers.Spire().V1alpha1().ClusterStaticEntries(),
		nil, nil, nil, nil, Options{
			Settings: render.Settings{
				TrustDomain:      spiffeid.RequireTrustDomainFromString("example.org"),
				ParentIDTemplate: "spiffe://{{ .TrustDomain }}/k8s-node/{{ .NodeMeta.Name }}",
			},
			ResyncInterval: time.Hour,
		})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.podQueue.ShutDown()
		c.clusterSPIFFEIDs.fanOut.ShutDown()
		c.clusterSPIFFEIDs.status.queue.ShutDown()
		c.clusterStaticEntries.queue.ShutDown()
	}()
	kubeInformers.Start(ctx.Done())
	spireInformers.Start(ctx.Done())
	kubeInformers.WaitForCacheSync(ctx.Done())
	spireInformers.WaitForCacheSync(ctx.Done())

	if got := queued(c.podQueue); len(got) != 0 {
		t.Errorf("pods queued by the initial lists: %v, want none", got)
	}
	if got := queued(c.clusterSPIFFEIDs.fanOut); len(got) != 0 {
		t.Errorf("ClusterSPIFFEIDs queued for fan-out by the initial list: %v, want none", got)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.clusterSPIFFEIDs.status.queue.Len() == 1, nil
	}); err != nil {
		t.Errorf("ClusterSPIFFEID status not queued after the initial list: %v", err)
	}

	if _, err := kube.CoreV1().Pods("shop").Create(ctx, pod("shop", "new", "n1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.podQueue.Len() == 1, nil
	}); err != nil {
		t.Fatalf("a pod created after the initial list was not queued: %v", err)
	}
	if diff := cmp.Diff([]ktypes.UID{"uid-shop-new"}, queued(c.podQueue)); diff != "" {
		t.Errorf("pods queued after the initial list (-want +got):\n%s", diff)
	}
}
