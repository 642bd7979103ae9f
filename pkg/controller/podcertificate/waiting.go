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
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/informercache"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
)

// errNoIdentityYet is why a request waits rather than being denied: its pod has no identity
// now, but a ClusterSPIFFEID, namespace or pod that changes may give it one. denial is what
// the request gets if nothing does before WaitForIdentity runs out.
type errNoIdentityYet struct {
	denial *podcert.Decision
}

func (e errNoIdentityYet) Error() string { return e.denial.Message }

// identityWaitLeft is how much longer a request may wait for its pod to get an identity:
// WaitForIdentity from its creation. Zero or less means deny now.
func (c *Controller) identityWaitLeft(req *certificatesv1.PodCertificateRequest, now time.Time) time.Duration {
	if c.opts.WaitForIdentity <= 0 {
		return 0
	}
	return req.CreationTimestamp.Add(c.opts.WaitForIdentity).Sub(now)
}

// waitingRequests are the requests that wait for their pod to get an identity, by namespace
// and pod, so that a change that may give pods identities queues only the requests it may
// concern. Each is also in the queue's delay until its wait runs out: this set only makes an
// identity that comes back reach it early, and counts it.
type waitingRequests struct {
	mu          sync.Mutex
	byNamespace map[string]map[string]waitingRequest // namespace → request key → why
	byPod       map[string]int                       // namespace/pod → requests
	byReason    map[podcert.Reason]int
}

// waitingRequest is one request's pod, and the reason it would be denied with now.
type waitingRequest struct {
	pod    string
	reason podcert.Reason
}

func newWaitingRequests() *waitingRequests {
	return &waitingRequests{byNamespace: map[string]map[string]waitingRequest{}, byPod: map[string]int{}, byReason: map[podcert.Reason]int{}}
}

// wait records that the request of key waits, for the reason given.
func (w *waitingRequests) wait(req *certificatesv1.PodCertificateRequest, key string, reason podcert.Reason) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := w.byNamespace[req.Namespace]
	if keys == nil {
		keys = map[string]waitingRequest{}
		w.byNamespace[req.Namespace] = keys
	}
	if old, ok := keys[key]; ok {
		w.count(req.Namespace, old, -1)
	}
	keys[key] = waitingRequest{pod: req.Spec.PodName, reason: reason}
	w.count(req.Namespace, keys[key], 1)
}

// forget drops the request of key, which no longer waits: it was decided, or is gone.
func (w *waitingRequests) forget(key string) {
	namespace, _, _ := strings.Cut(key, "/")
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := w.byNamespace[namespace]
	old, ok := keys[key]
	if !ok {
		return
	}
	delete(keys, key)
	if len(keys) == 0 {
		delete(w.byNamespace, namespace)
	}
	w.count(namespace, old, -1)
}

// count moves the numbers waiting for r's pod and reason by delta, and the metric with them.
func (w *waitingRequests) count(namespace string, r waitingRequest, delta int) {
	pod := namespace + "/" + r.pod
	if w.byPod[pod] += delta; w.byPod[pod] == 0 {
		delete(w.byPod, pod)
	}
	w.byReason[r.reason] += delta
	metrics.PodCertificateRequestsWaiting.WithLabelValues(string(r.reason)).Set(float64(w.byReason[r.reason]))
}

// len is how many requests wait.
func (w *waitingRequests) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, keys := range w.byNamespace {
		n += len(keys)
	}
	return n
}

// hasPod reports whether a request of namespace's pod waits.
func (w *waitingRequests) hasPod(namespace, pod string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byPod[namespace+"/"+pod] > 0
}

// keys returns, sorted, the keys of the requests that wait in namespace, and only of pod
// unless it is ""; every waiting request's when namespace is "".
func (w *waitingRequests) keys(namespace, pod string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for ns, keys := range w.byNamespace {
		if namespace != "" && ns != namespace {
			continue
		}
		for key, r := range keys {
			if pod == "" || r.pod == pod {
				out = append(out, key)
			}
		}
	}
	sort.Strings(out)
	return out
}

// requeueWaiting queues again, to be decided now, the waiting requests of namespace's pod
// (all of namespace's when pod is "", every one when namespace is ""). Their cost is bounded
// by the requests that wait, each of which waits WaitForIdentity at most, and the queue takes
// namespaces in turn, so one namespace's waiting requests delay no other's.
func (c *Controller) requeueWaiting(namespace, pod string) {
	for _, key := range c.waiting.keys(namespace, pod) {
		c.queue.Add(key)
	}
}

// onClusterSPIFFEIDAdd queues the waiting requests: the new ClusterSPIFFEID may select
// their pods.
func (c *Controller) onClusterSPIFFEIDAdd(any) {
	c.requeueWaiting("", "")
}

// onClusterSPIFFEIDDelete forgets a deleted ClusterSPIFFEID's compiled form, and queues the
// waiting requests: a fallback may now apply to their pods.
func (c *Controller) onClusterSPIFFEIDDelete(obj any) {
	if gone, ok := runner.Unwrap[*spirev1alpha1.ClusterSPIFFEID](obj); ok {
		c.compiled.Forget(gone.Name)
	}
	c.requeueWaiting("", "")
}

// onClusterSPIFFEIDUpdate queues the waiting requests when what selects and renders
// identities may have changed: the spec (its generation) or the labels the informer is
// narrowed by. Status updates, the most frequent, change neither.
func (c *Controller) onClusterSPIFFEIDUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*spirev1alpha1.ClusterSPIFFEID)
	n, ok2 := newObj.(*spirev1alpha1.ClusterSPIFFEID)
	if !ok1 || !ok2 || o.Generation != n.Generation || !maps.Equal(o.Labels, n.Labels) {
		c.requeueWaiting("", "")
	}
}

// onNamespaceUpdate queues the namespace's waiting requests when its labels, all that
// selectors and templates read of it, change.
func (c *Controller) onNamespaceUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Namespace)
	n, ok2 := newObj.(*corev1.Namespace)
	if ok1 && ok2 && !maps.Equal(o.Labels, n.Labels) {
		c.requeueWaiting(n.Name, "")
	}
}

// onPodUpdate queues a pod's waiting requests when something its entries depend on changed
// (its labels, say); status updates do not. Most pods have no waiting request, and cost a
// map lookup.
func (c *Controller) onPodUpdate(oldObj, newObj any) {
	oldPod, okOld := oldObj.(*corev1.Pod)
	pod, ok := newObj.(*corev1.Pod)
	if !ok || !okOld || !c.waiting.hasPod(pod.Namespace, pod.Name) || informercache.SameForEntries(oldPod, pod) {
		return
	}
	c.requeueWaiting(pod.Namespace, pod.Name)
}
