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
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// syncPod makes SPIRE's entries for one pod equal to what applies to it now. A pod that is
// gone, or no longer eligible, declares nothing, so its entries are deleted.
func (c *Controller) syncPod(ctx context.Context, uid types.UID) error {
	c.resyncLock.RLock()
	defer c.resyncLock.RUnlock()

	pod, err := c.podByUID(uid)
	if err != nil {
		return err
	}
	identities, err := c.activeClusterSPIFFEIDs()
	if err != nil {
		return err
	}
	var declared []*render.DeclaredEntry
	var outs podOutcomes
	if pod != nil {
		declared, outs = c.declarePod(ctx, pod, identities)
	}
	p := reconcile(declared, c.entries.forPod(uid), c.fieldSupport.get())
	failures, err := c.finalize(ctx, p)
	if pod != nil {
		c.reportWriteFailures(pod, declared, failures)
	}
	byPod := map[types.UID]podOutcomes{uid: outs}
	recordPlanOutcomes(byPod, p, failures)
	c.recordOutcomes(uid, byPod[uid])
	return err
}

// podByUID returns the pod with a UID, or nil when the informer has none.
func (c *Controller) podByUID(uid types.UID) (*corev1.Pod, error) {
	objs, err := c.podIndexer.ByIndex(podUIDIndex, string(uid))
	if err != nil {
		return nil, fmt.Errorf("looking up pod %s: %w", uid, err)
	}
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			return pod, nil
		}
	}
	return nil, nil
}

// activeClusterSPIFFEIDs returns the compiled ClusterSPIFFEIDs of this controller's class, oldest
// first.
func (c *Controller) activeClusterSPIFFEIDs() ([]*render.ClusterSPIFFEID, error) {
	if c.opts.IgnoreClusterSPIFFEIDs {
		return nil, nil
	}
	csids, err := c.clusterSPIFFEIDLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing ClusterSPIFFEIDs: %w", err)
	}
	ids := make([]*render.ClusterSPIFFEID, 0, len(csids))
	for _, csid := range csids {
		if csid.DeletionTimestamp != nil || !c.opts.ClassMatches(csid.Spec.ClassName) {
			continue
		}
		ids = append(ids, c.clusterSPIFFEIDs.get(csid))
	}
	slices.SortFunc(ids, func(a, b *render.ClusterSPIFFEID) int { return a.Declarer("").Compare(b.Declarer("")) })
	return ids, nil
}

// declarePod renders the entries the identities declare for a pod. Pods that run nowhere yet,
// have finished, or live in an ignored namespace declare nothing, and so do pods whose
// namespace or node the informers do not know yet: their events will bring the pod back.
func (c *Controller) declarePod(ctx context.Context, pod *corev1.Pod, clusterSPIFFEIDs []*render.ClusterSPIFFEID) ([]*render.DeclaredEntry, podOutcomes) {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, nil
	}
	if c.opts.IgnoreNamespace(pod.Namespace) {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	ns, err := c.namespaceLister.Get(pod.Namespace)
	if err != nil {
		logNotFound(logger, err, "Namespace of pod not in cache yet", "pod", klog.KObj(pod))
		return nil, nil
	}
	node, err := c.nodeLister.Get(pod.Spec.NodeName)
	if err != nil {
		logNotFound(logger, err, "Node of pod not in cache yet", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		return nil, nil
	}

	endpointSlices, err := c.endpointSlicesOf(pod)
	if err != nil {
		logger.Error(err, "Listing the Services of pod", "pod", klog.KObj(pod))
	}
	declared, failures := c.renderer.PodEntries(clusterSPIFFEIDs, pod, ns, node, endpointSlices)
	outs := podOutcomes{}
	for _, f := range failures {
		outs[f.ClusterSPIFFEID.Name] = outcomeRenderFailure
		metrics.RenderFailures.WithLabelValues(render.KindClusterSPIFFEID).Inc()
		logger.V(2).Info("Cannot render entry", "clusterSPIFFEID", f.ClusterSPIFFEID.Name, "pod", klog.KObj(pod), "err", f.Err)
		c.reportRenderFailure(f.ClusterSPIFFEID, pod, f.Err)
	}
	return declared, outs
}

// endpointSlicesOf returns the EndpointSlices that target a pod.
func (c *Controller) endpointSlicesOf(pod *corev1.Pod) ([]*discoveryv1.EndpointSlice, error) {
	objs, err := c.sliceIndexer.ByIndex(endpointSlicePodIndex, pod.Namespace+"/"+pod.Name)
	if err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, obj := range objs {
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
			out = append(out, slice)
		}
	}
	return out, nil
}

func logNotFound(logger klog.Logger, err error, msg string, kv ...any) {
	if apierrors.IsNotFound(err) {
		logger.V(4).Info(msg, kv...)
		return
	}
	logger.Error(err, msg, kv...)
}

// recordPlanOutcomes sets, in byPod, the outcome of every entry a ClusterSPIFFEID declared
// for a pod in the plan, given the write failures.
func recordPlanOutcomes(byPod map[types.UID]podOutcomes, p plan, failures map[render.Key]error) {
	set := func(d *render.DeclaredEntry, o outcome) {
		if d.Declarer.Kind != render.KindClusterSPIFFEID {
			return
		}
		if o == outcomeSet && failures[d.Key] != nil {
			o = outcomeEntryFailure
		}
		if byPod[d.Declarer.PodUID] == nil {
			byPod[d.Declarer.PodUID] = podOutcomes{}
		}
		byPod[d.Declarer.PodUID][d.Declarer.Name] = o
	}
	for _, d := range p.toCreate {
		set(d, outcomeSet)
	}
	for _, u := range p.toUpdate {
		set(u.desired, outcomeSet)
	}
	for _, d := range p.inSync {
		set(d, outcomeSet)
	}
	for _, d := range p.masked {
		set(d, outcomeMasked)
	}
}

// recordOutcomes stores a pod's outcomes and schedules the status of every ClusterSPIFFEID
// whose counters changed.
func (c *Controller) recordOutcomes(uid types.UID, outs podOutcomes) {
	for _, name := range c.outcomes.record(uid, outs) {
		c.statusQueue.AddAfter(name, statusDelay)
	}
}

// reportRenderFailure tells the ClusterSPIFFEID's owner why a pod got no entry. Events about
// one object are rate limited and aggregated by client-go, so a template broken for thousands
// of pods does not flood the API.
func (c *Controller) reportRenderFailure(id *render.ClusterSPIFFEID, pod *corev1.Pod, err error) {
	csid, getErr := c.clusterSPIFFEIDLister.Get(id.Name)
	if getErr != nil {
		return
	}
	c.recorder.Eventf(csid, corev1.EventTypeWarning, "RenderFailed",
		"Cannot render entry for pod %s/%s: %s", pod.Namespace, pod.Name, truncate(err.Error(), 512))
}

// reportWriteFailures tells each ClusterSPIFFEID whose entry for the pod SPIRE did not take.
func (c *Controller) reportWriteFailures(pod *corev1.Pod, declared []*render.DeclaredEntry, failures map[render.Key]error) {
	for _, d := range declared {
		err := failures[d.Key]
		if err == nil || d.Declarer.Kind != render.KindClusterSPIFFEID {
			continue
		}
		if csid, getErr := c.clusterSPIFFEIDLister.Get(d.Declarer.Name); getErr == nil {
			c.recorder.Eventf(csid, corev1.EventTypeWarning, "WriteFailed",
				"SPIRE did not take the entry for pod %s/%s (it is retried): %s", pod.Namespace, pod.Name, truncate(err.Error(), 512))
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// clusterSPIFFEIDCache keeps compiled ClusterSPIFFEIDs across syncs, recompiling one only when
// its UID or generation changes (status writes do not change the generation).
type clusterSPIFFEIDCache struct {
	mu    sync.Mutex
	items map[string]*render.ClusterSPIFFEID
}

func newClusterSPIFFEIDCache() *clusterSPIFFEIDCache {
	return &clusterSPIFFEIDCache{items: map[string]*render.ClusterSPIFFEID{}}
}

// get returns the compiled form of a ClusterSPIFFEID.
func (c *clusterSPIFFEIDCache) get(in *spirev1alpha1.ClusterSPIFFEID) *render.ClusterSPIFFEID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if compiled, ok := c.items[in.Name]; ok && compiled.UID == in.UID && compiled.Generation == in.Generation {
		return compiled
	}
	compiled := render.CompileClusterSPIFFEID(in)
	c.items[in.Name] = compiled
	return compiled
}

// forget drops a deleted ClusterSPIFFEID.
func (c *clusterSPIFFEIDCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.items, name)
}
