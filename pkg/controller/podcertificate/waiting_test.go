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

package podcertificate

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
)

// testWaitForIdentity is the WaitForIdentity of the tests that wait.
const testWaitForIdentity = 5 * time.Minute

func waitForIdentity(o *Options) { o.WaitForIdentity = testWaitForIdentity }

// apiReads are the reads the controller made of the API server, as "verb resource".
func (env *testEnv) apiReads() []string {
	var out []string
	for _, actions := range [][]clienttesting.Action{env.kube.Actions(), env.spireAPI.Actions()} {
		for _, a := range actions {
			if a.GetVerb() == "get" || a.GetVerb() == "list" {
				out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
			}
		}
	}
	return out
}

// TestSyncRequestWaitsForAnIdentity: a request whose pod has no identity now (its
// ClusterSPIFFEID is being applied again, or has not reached the informer; its namespace has
// not got its label yet) is not denied, since a denial is final: it waits, counted, and is
// issued once the identity is there. Deciding costs no read of the API server.
func TestSyncRequestWaitsForAnIdentity(t *testing.T) {
	for _, tc := range []struct {
		name string
		// without puts the cluster without the pod's identity in the caches; with gives it
		// the identity and calls the handler of that change.
		without, with func(t *testing.T, env *testEnv, cl cluster)
	}{
		{"ClusterSPIFFEID created", func(t *testing.T, env *testEnv, cl cluster) {
			env.add(t, cl.ns, cl.node, cl.pod)
		}, func(t *testing.T, env *testEnv, cl cluster) {
			env.add(t, cl.csid)
			env.c.onClusterSPIFFEIDAdd(cl.csid)
		}},
		{"namespace labelled", func(t *testing.T, env *testEnv, cl cluster) {
			env.add(t, namespace(cl.ns.Name, nil), cl.node, cl.pod, cl.csid)
		}, func(t *testing.T, env *testEnv, cl cluster) {
			env.addToCache(t, cl.ns)
			env.c.onNamespaceUpdate(namespace(cl.ns.Name, nil), cl.ns)
		}},
		{"pod labelled", func(t *testing.T, env *testEnv, cl cluster) {
			unlabelled := pod(cl.pod.Namespace, cl.pod.Name, cl.node.Name, nil)
			unlabelled.ResourceVersion = "1"
			env.add(t, cl.ns, cl.node, unlabelled, cl.csid)
		}, func(t *testing.T, env *testEnv, cl cluster) {
			unlabelled := pod(cl.pod.Namespace, cl.pod.Name, cl.node.Name, nil)
			unlabelled.ResourceVersion = "1"
			labelled := cl.pod.DeepCopy()
			labelled.ResourceVersion = "2"
			env.addToCache(t, labelled)
			env.c.onPodUpdate(unlabelled, labelled)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{options: waitForIdentity})
			cl := newCluster()
			cl.csid.Spec.NamespaceSelector = selector(map[string]string{"env": "prod"})
			tc.without(t, env, cl)
			key := newP256Key(t)
			req := kubeletRequest(t, cl.pod, cl.node, key)
			env.add(t, req)
			env.kube.ClearActions()
			env.spireAPI.ClearActions()

			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			if got := env.writes(); len(got) != 0 {
				t.Fatalf("wrote %v for a request that should wait", got)
			}
			if got := env.apiReads(); len(got) != 0 {
				t.Errorf("read %v from the API server, want no read: the caches decide, the wait covers their lag", got)
			}
			if n := env.c.WaitingForIdentity(); n != 1 {
				t.Fatalf("WaitingForIdentity = %d, want 1", n)
			}
			if n := env.c.queue.Len(); n != 0 {
				t.Fatalf("the waiting request is ready in the queue (%d keys), want it delayed", n)
			}

			tc.with(t, env, cl)
			if got := getWithin(t, env.c.queue); got != req.Namespace+"/"+req.Name {
				t.Fatalf("queued %q, want the waiting request", got)
			}
			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest once the pod has its identity: %v", err)
			}
			checkIssued(t, env, req, key, "spiffe://example.org/ns/prod/sa/web-sa", []string{"web.prod.svc"})
			if n := env.c.WaitingForIdentity(); n != 0 {
				t.Errorf("WaitingForIdentity = %d after the request was issued, want 0", n)
			}
		})
	}
}

// TestSyncRequestDeniesOnceTheWaitRunsOut: a request whose pod still has no identity
// WaitForIdentity after its creation is denied, with the reason it waited for, and no longer
// counted; one in an ignored namespace, which nothing but a restart can change, and every
// one when WaitForIdentity is 0, are denied at once. No denial reads the API server.
func TestSyncRequestDeniesOnceTheWaitRunsOut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options func(*Options)
		age     time.Duration
		named   string
		want    podcert.Reason
	}{
		{name: "no ClusterSPIFFEID selects the pod, wait over", options: waitForIdentity, age: testWaitForIdentity + time.Second, want: podcert.ReasonNoIdentity},
		{name: "the ClusterSPIFFEID named does not exist, wait over", options: waitForIdentity, age: testWaitForIdentity + time.Second,
			named: "web-identity", want: podcert.ReasonClusterSPIFFEIDNotApplicable},
		{name: "no wait", age: 0, want: podcert.ReasonNoIdentity},
		{name: "an ignored namespace", age: 0, want: podcert.ReasonNoIdentity, options: func(o *Options) {
			waitForIdentity(o)
			o.IgnoreNamespace = func(ns string) bool { return ns == "prod" }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{options: tc.options})
			cl := newCluster()
			env.add(t, cl.ns, cl.node, cl.pod)
			req := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
			req.CreationTimestamp = metav1.NewTime(time.Now().Add(-tc.age))
			if tc.named != "" {
				annotate(req, tc.named)
			}
			env.add(t, req)
			// It waited before: it no longer counts once denied.
			env.c.waiting.wait(req, req.Namespace+"/"+req.Name, tc.want)
			env.kube.ClearActions()
			env.spireAPI.ClearActions()

			if err := env.sync(req); err != nil {
				t.Fatalf("syncRequest: %v", err)
			}
			if got := env.apiReads(); len(got) != 0 {
				t.Errorf("the denial read %v from the API server, want nothing", got)
			}
			cond := condition(t, env.request(t, req))
			if cond.Type != certificatesv1.PodCertificateRequestConditionTypeDenied || cond.Reason != string(tc.want) {
				t.Errorf("condition %s reason %s, want Denied reason %s (message %q)", cond.Type, cond.Reason, tc.want, cond.Message)
			}
			if n := env.c.WaitingForIdentity(); n != 0 {
				t.Errorf("WaitingForIdentity = %d after the denial, want 0", n)
			}
		})
	}
}

// TestIdentityChangesRequeueWaitingRequests: only the changes that may give a pod an
// identity queue waiting requests, and only those they concern: any ClusterSPIFFEID created,
// deleted, or changed in spec or labels (not in status) queues every waiting request; a
// namespace's new labels, its own; a pod's new labels, its own.
func TestIdentityChangesRequeueWaitingRequests(t *testing.T) {
	env := newTestEnv(t, envOptions{noStart: true, options: waitForIdentity})
	waiting := map[string]*certificatesv1.PodCertificateRequest{}
	for _, p := range []*corev1.Pod{pod("prod", "web", "node-1", nil), pod("prod", "db", "node-1", nil), pod("dev", "web", "node-1", nil)} {
		req := kubeletRequest(t, p, node("node-1"), newP256Key(t))
		req.Name = p.Name + "-req"
		key := req.Namespace + "/" + req.Name
		waiting[key] = req
		env.c.waiting.wait(req, key, podcert.ReasonNoIdentity)
	}
	all := []string{"dev/web-req", "prod/db-req", "prod/web-req"}
	csid := clusterSPIFFEID("web", time.Hour, spirev1alpha1.ClusterSPIFFEIDSpec{})
	respecified := csid.DeepCopy()
	respecified.Generation++
	relabelled := csid.DeepCopy()
	relabelled.Labels = map[string]string{"team": "web"}
	statusOnly := csid.DeepCopy()
	statusOnly.Status.Stats.NamespacesSelected = 3
	podV1 := pod("prod", "web", "node-1", map[string]string{"app": "web"})
	podV1.ResourceVersion = "1"
	podV2 := podV1.DeepCopy()
	podV2.ResourceVersion = "2"
	podV2.Labels = map[string]string{"app": "api"}
	podStatus := podV1.DeepCopy()
	podStatus.ResourceVersion = "3"
	podStatus.Status.PodIP = "10.0.0.1"

	for _, tc := range []struct {
		name  string
		event func()
		want  []string
	}{
		{"ClusterSPIFFEID created", func() { env.c.onClusterSPIFFEIDAdd(csid) }, all},
		{"ClusterSPIFFEID deleted", func() { env.c.onClusterSPIFFEIDDelete(csid) }, all},
		{"ClusterSPIFFEID spec changed", func() { env.c.onClusterSPIFFEIDUpdate(csid, respecified) }, all},
		{"ClusterSPIFFEID labels changed", func() { env.c.onClusterSPIFFEIDUpdate(csid, relabelled) }, all},
		{"ClusterSPIFFEID status changed", func() { env.c.onClusterSPIFFEIDUpdate(csid, statusOnly) }, nil},
		{"namespace labelled", func() {
			env.c.onNamespaceUpdate(namespace("prod", nil), namespace("prod", map[string]string{"env": "prod"}))
		}, []string{"prod/db-req", "prod/web-req"}},
		{"namespace annotated", func() {
			annotated := namespace("prod", nil)
			annotated.Annotations = map[string]string{"note": "x"}
			env.c.onNamespaceUpdate(namespace("prod", nil), annotated)
		}, nil},
		{"pod labelled", func() { env.c.onPodUpdate(podV1, podV2) }, []string{"prod/web-req"}},
		{"pod status changed", func() { env.c.onPodUpdate(podV1, podStatus) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.event()
			var got []string
			for env.c.queue.Len() > 0 {
				key, _ := env.c.queue.Get()
				env.c.queue.Done(key)
				got = append(got, key)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("queued (-want +got):\n%s", diff)
			}
		})
	}

	// A deleted request no longer waits.
	env.c.forgetRequest(waiting["prod/db-req"])
	if got := env.c.waiting.keys("", ""); !slices.Equal(got, []string{"dev/web-req", "prod/web-req"}) {
		t.Errorf("waiting after a delete: %v", got)
	}
}

// TestWaitingRequestsCount: the set counts each request once, by pod and by reason, however
// often it waits again, and forgets it once.
func TestWaitingRequestsCount(t *testing.T) {
	w := newWaitingRequests()
	web := kubeletRequest(t, pod("prod", "web", "node-1", nil), node("node-1"), newP256Key(t))
	web.Name = "web-req"
	db := kubeletRequest(t, pod("prod", "db", "node-1", nil), node("node-1"), newP256Key(t))
	db.Name = "db-req"
	w.wait(web, "prod/web-req", podcert.ReasonNoIdentity)
	w.wait(web, "prod/web-req", podcert.ReasonClusterSPIFFEIDNotApplicable)
	w.wait(db, "prod/db-req", podcert.ReasonNoIdentity)
	if w.len() != 2 || !w.hasPod("prod", "web") || !w.hasPod("prod", "db") || w.hasPod("dev", "web") {
		t.Fatalf("len %d, web %t, db %t", w.len(), w.hasPod("prod", "web"), w.hasPod("prod", "db"))
	}
	if diff := cmp.Diff(map[podcert.Reason]int{podcert.ReasonNoIdentity: 1, podcert.ReasonClusterSPIFFEIDNotApplicable: 1}, w.byReason); diff != "" {
		t.Errorf("by reason (-want +got):\n%s", diff)
	}
	w.forget("prod/web-req")
	w.forget("prod/web-req")
	w.forget("prod/db-req")
	if w.len() != 0 || w.hasPod("prod", "web") || len(w.byPod) != 0 || len(w.byNamespace) != 0 {
		t.Errorf("after forgetting both: len %d, by pod %v, by namespace %v", w.len(), w.byPod, w.byNamespace)
	}
	if w.byReason[podcert.ReasonNoIdentity] != 0 || w.byReason[podcert.ReasonClusterSPIFFEIDNotApplicable] != 0 {
		t.Errorf("by reason after forgetting both: %v", w.byReason)
	}
}
