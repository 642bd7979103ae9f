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
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestEnqueueRequest: the request handlers queue only requests of the signer name that have
// not ended; an ended one can no longer change, and another signer's is not ours.
func TestEnqueueRequest(t *testing.T) {
	cl := newCluster()
	endedWith := func(condType string, status metav1.ConditionStatus) func(*certificatesv1.PodCertificateRequest) {
		return func(req *certificatesv1.PodCertificateRequest) {
			req.Status.Conditions = []metav1.Condition{{Type: condType, Status: status, Reason: "Test"}}
		}
	}
	for _, tc := range []struct {
		name      string
		change    func(*certificatesv1.PodCertificateRequest)
		tombstone bool
		want      bool
	}{
		{name: "pending", want: true},
		{name: "pending, as a tombstone", tombstone: true, want: true},
		{name: "another signer", change: func(req *certificatesv1.PodCertificateRequest) { req.Spec.SignerName = "example.com/other" }},
		{name: "issued", change: endedWith(certificatesv1.PodCertificateRequestConditionTypeIssued, metav1.ConditionTrue)},
		{name: "denied", change: endedWith(certificatesv1.PodCertificateRequestConditionTypeDenied, metav1.ConditionTrue)},
		{name: "failed", change: endedWith(certificatesv1.PodCertificateRequestConditionTypeFailed, metav1.ConditionTrue)},
		{name: "a condition of another type", change: endedWith("SomethingElse", metav1.ConditionTrue), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, envOptions{noStart: true})
			req := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
			if tc.change != nil {
				tc.change(req)
			}
			var obj any = req
			if tc.tombstone {
				obj = cache.DeletedFinalStateUnknown{Key: req.Namespace + "/" + req.Name, Obj: req}
			}
			env.c.enqueueRequest(obj)
			if got := env.c.queue.Len() == 1; got != tc.want {
				t.Fatalf("queued: %v, want %v", got, tc.want)
			}
			if tc.want {
				if key, _ := env.c.queue.Get(); key != req.Namespace+"/"+req.Name {
					t.Errorf("queued %q, want %s/%s", key, req.Namespace, req.Name)
				}
			}
		})
	}
	t.Run("not a request", func(t *testing.T) {
		env := newTestEnv(t, envOptions{noStart: true})
		env.c.enqueueRequest(cl.pod)
		if env.c.queue.Len() != 0 {
			t.Error("queued a pod")
		}
	})
}

// TestHandlersOnInformerEvents: with the informers running, creating a pending request of
// the signer name queues it and an issued one does not; creating, updating or deleting a
// bundle queues the bundle's one key, so that a bundle changed behind the controller's back
// is put right.
func TestHandlersOnInformerEvents(t *testing.T) {
	env := newTestEnv(t, envOptions{noStart: true})
	go env.requestInformer.Run(env.ctx.Done())
	go env.bundleInformer.Run(env.ctx.Done())
	if !cache.WaitForCacheSync(env.ctx.Done(), env.requestInformer.HasSynced, env.bundleInformer.HasSynced) {
		t.Fatal("informers did not sync")
	}
	cl := newCluster()
	requests := env.kube.CertificatesV1().PodCertificateRequests(cl.pod.Namespace)
	issued := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
	issued.Name = "issued"
	issued.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "Issued"}}
	pending := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
	pending.Name = "pending"
	for _, req := range []*certificatesv1.PodCertificateRequest{issued, pending} {
		if _, err := requests.Create(env.ctx, req, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if key := getWithin(t, env.c.queue); key != "prod/pending" {
		t.Errorf("queued %q, want prod/pending", key)
	}

	bundles := env.kube.CertificatesV1().ClusterTrustBundles()
	b := trustBundle(testBundleName, testSignerName, "x")
	for _, event := range []struct {
		name string
		do   func() error
	}{
		{"create", func() error { _, err := bundles.Create(env.ctx, b, metav1.CreateOptions{}); return err }},
		{"update", func() error {
			b.Spec.TrustBundle = "y"
			_, err := bundles.Update(env.ctx, b, metav1.UpdateOptions{})
			return err
		}},
		{"delete", func() error { return bundles.Delete(env.ctx, b.Name, metav1.DeleteOptions{}) }},
	} {
		if err := event.do(); err != nil {
			t.Fatalf("%s: %v", event.name, err)
		}
		if key := getWithin(t, env.c.bundleQueue); key != bundleKey {
			t.Errorf("after %s, queued %q, want %q", event.name, key, bundleKey)
		}
	}
	if n := env.c.queue.Len(); n != 0 {
		t.Errorf("request queue holds %d more keys, want none: the issued request is not queued", n)
	}
}

// getWithin takes the next key off queue, failing the test when none comes within seconds.
func getWithin(t *testing.T, queue interface {
	Get() (string, bool)
	Done(string)
}) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		key, _ := queue.Get()
		queue.Done(key)
		got <- key
	}()
	select {
	case key := <-got:
		return key
	case <-time.After(5 * time.Second):
		t.Fatal("nothing was queued")
		return ""
	}
}

// TestResyncQueuesPendingRequests: a key the worker dropped after maxRetries is left "to the
// next full resync" (runner.handleErr), so the resync queues every request of the signer
// name that has not ended, and only those.
func TestResyncQueuesPendingRequests(t *testing.T) {
	env := newTestEnv(t, envOptions{})
	cl := newCluster()
	pending := kubeletRequest(t, cl.pod, cl.node, newP256Key(t))
	pending.Name = "pending"
	issued := pending.DeepCopy()
	issued.Name = "issued"
	issued.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "Issued"}}
	other := pending.DeepCopy()
	other.Name = "other-signer"
	other.Spec.SignerName = "example.com/other"
	env.add(t, pending, issued, other)

	if err := env.c.resync(env.ctx); err != nil {
		t.Fatalf("resync: %v", err)
	}
	if n := env.c.queue.Len(); n != 1 {
		t.Fatalf("resync queued %d requests, want 1", n)
	}
	if key, _ := env.c.queue.Get(); key != "prod/pending" {
		t.Errorf("resync queued %q, want prod/pending", key)
	}
}
