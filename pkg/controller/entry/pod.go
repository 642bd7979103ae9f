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
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// syncPod makes SPIRE's entries for one pod equal to what applies to it now. A pod that is
// gone, or no longer eligible, declares nothing, so its entries are deleted. A pod that must be
// read whole and cannot be leaves its entries as they are: the sync fails and is retried.
func (c *Controller) syncPod(ctx context.Context, uid types.UID) error {
	pod, found, err := c.pods.ByUID(uid)
	if err != nil {
		return err
	}
	clusterSPIFFEIDs, err := c.activeClusterSPIFFEIDs()
	if err != nil {
		return err
	}
	if found {
		if pod, found, err = c.podToRender(ctx, pod, clusterSPIFFEIDs); err != nil {
			return err
		}
	}
	var declared []*render.DeclaredEntry
	var renderFailures []string
	if found {
		declared, renderFailures = c.declarePod(ctx, pod, clusterSPIFFEIDs)
	} else {
		pod = nil
	}
	res, err := c.reconciler.Sync(ctx, reconciler.PodScope(uid, renderFailures...), declared)
	if pod != nil {
		c.reportWriteFailures(pod, declared, res.Failures)
	}
	c.observePodSync(ctx, uid, pod, declared, res, err)
	c.clusterSPIFFEIDs.status.enqueuePaced(res.StatusChanged)
	return err
}

// podToRender returns the pod to render a cached pod's entries from: the cached pod, or, when
// one of the ClusterSPIFFEIDs that select it reads fields the cache does not keep
// (render.NeedsWholePod), the pod read whole from the API server. It reports false when the
// API server no longer holds the pod, and fails when it cannot be read.
func (c *Controller) podToRender(ctx context.Context, cached *corev1.Pod, clusterSPIFFEIDs []*render.ClusterSPIFFEID) (*corev1.Pod, bool, error) {
	if !render.PodDeclaresEntries(cached) || c.opts.IgnoreNamespace(cached.Namespace) {
		return cached, true, nil
	}
	ns, err := c.namespaceLister.Get(cached.Namespace)
	if err != nil || !render.NeedsWholePod(clusterSPIFFEIDs, ns, cached) {
		return cached, true, nil // declarePod deals with a namespace not in the cache
	}
	return c.wholePods.Get(ctx, cached)
}

// activeClusterSPIFFEIDs returns the compiled ClusterSPIFFEIDs of this controller's class,
// most preferred first.
func (c *Controller) activeClusterSPIFFEIDs() ([]*render.ClusterSPIFFEID, error) {
	all, err := c.clusterSPIFFEIDs.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing ClusterSPIFFEIDs: %w", err)
	}
	return c.clusterSPIFFEIDs.compiled.Active(all, c.opts.Class.Matches), nil
}

// declarePod renders the entries the ClusterSPIFFEIDs declare for a pod. Pods that have
// finished or live in an ignored namespace declare nothing, and so do pods whose namespace the
// informers do not know yet: its event will bring the pod back. A pod that is not scheduled
// yet, or whose node is unknown, fails to render for every ClusterSPIFFEID that selects it, as
// in spire-controller-manager, whose status counts it so; the node's event brings it back.
//
// It also returns the names of the ClusterSPIFFEIDs that apply to the pod but rendered no
// entry for it; each is counted, and, unless the pod only waits for its node, logged and told
// in an Event.
func (c *Controller) declarePod(ctx context.Context, pod *corev1.Pod, clusterSPIFFEIDs []*render.ClusterSPIFFEID) ([]*render.DeclaredEntry, []string) {
	if !render.PodDeclaresEntries(pod) || c.opts.IgnoreNamespace(pod.Namespace) {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	ns, err := c.namespaceLister.Get(pod.Namespace)
	if err != nil {
		logNotFound(logger, err, "Namespace of pod not in cache yet", "pod", klog.KObj(pod))
		return nil, nil
	}
	var node *corev1.Node
	if pod.Spec.NodeName != "" {
		node, err = c.nodeLister.Get(pod.Spec.NodeName)
		switch {
		case apierrors.IsNotFound(err):
			logger.V(4).Info("Node of pod not in cache", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		case err != nil:
			logger.Error(err, "Getting the node of pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
			return nil, nil
		}
	}
	endpointSlices, err := c.slices.ForPod(pod.Namespace, pod.Name)
	if err != nil {
		logger.Error(err, "Listing the Services of pod", "pod", klog.KObj(pod))
	}

	declared, failures := c.renderer.PodEntries(clusterSPIFFEIDs, pod, ns, node, endpointSlices)
	var failed []string
	for _, f := range failures {
		failed = append(failed, f.ClusterSPIFFEID.Name)
		if errors.Is(f.Err, render.ErrNodeNotFound) {
			continue
		}
		metrics.RenderFailures.WithLabelValues(render.KindClusterSPIFFEID).Inc()
		logger.V(2).Info("Cannot render entry", "clusterSPIFFEID", f.ClusterSPIFFEID.Name, "pod", klog.KObj(pod), "err", f.Err)
		c.reportRenderFailure(f.ClusterSPIFFEID.Name, pod, f.Err)
	}
	return declared, failed
}

func logNotFound(logger klog.Logger, err error, msg string, kv ...any) {
	if apierrors.IsNotFound(err) {
		logger.V(4).Info(msg, kv...)
		return
	}
	logger.Error(err, msg, kv...)
}

// reportRenderFailure tells the ClusterSPIFFEID's owner why a pod got no entry. Events about
// one object are rate limited and aggregated by client-go, so a template broken for thousands
// of pods does not flood the API.
func (c *Controller) reportRenderFailure(name string, pod *corev1.Pod, err error) {
	clusterSPIFFEID, getErr := c.clusterSPIFFEIDs.lister.Get(name)
	if getErr != nil {
		return
	}
	c.events.Recorder.Eventf(clusterSPIFFEID, corev1.EventTypeWarning, spirev1alpha1.ReasonRenderFailed,
		"Cannot render entry for pod %s/%s: %s", pod.Namespace, pod.Name, runner.Truncate(err.Error(), 512))
}

// reportWriteFailures tells each ClusterSPIFFEID whose entry for the pod SPIRE did not take.
func (c *Controller) reportWriteFailures(pod *corev1.Pod, declared []*render.DeclaredEntry, failures map[render.Key]error) {
	for _, d := range declared {
		err := failures[d.Key]
		if err == nil || d.Declarer.Kind != render.KindClusterSPIFFEID {
			continue
		}
		if clusterSPIFFEID, getErr := c.clusterSPIFFEIDs.lister.Get(d.Declarer.Name); getErr == nil {
			c.events.Recorder.Eventf(clusterSPIFFEID, corev1.EventTypeWarning, spirev1alpha1.ReasonWriteFailed,
				"SPIRE did not take the entry for pod %s/%s (it is retried): %s", pod.Namespace, pod.Name, runner.Truncate(err.Error(), 512))
		}
	}
}

// observePodSync records what a pod sync did in the metrics: the time it spent writing to
// SPIRE and, through the latency tracker, the pod's time to its entries. pod is nil when the
// pod is gone. A dry run writes nothing, so it observes nothing.
func (c *Controller) observePodSync(ctx context.Context, uid types.UID, pod *corev1.Pod, declared []*render.DeclaredEntry, res reconciler.Result, err error) {
	if c.opts.DryRun {
		return
	}
	p := res.Plan
	if len(p.ToCreate)+len(p.ToUpdate)+len(p.ToDelete) > 0 {
		metrics.PodSPIREWriteDuration.Observe(res.WriteDuration.Seconds())
	}
	s := metrics.PodSync{
		Gone:       pod == nil,
		HadEntries: len(p.InSync)+len(p.ToUpdate)+len(p.ToDelete) > 0,
		Wrote:      wroteAny(p, res.Failures),
		Complete:   err == nil,
	}
	if pod != nil {
		s.Eligible = eligibleSince(pod, declared)
	}
	if latency, observed := c.podLatency.Synced(uid, s); observed {
		klog.FromContext(ctx).V(2).Info("SPIRE holds all the entries of pod", "pod", klog.KObj(pod), "latency", latency)
	}
}

// wroteAny reports whether a plan created or updated at least one entry without failing.
func wroteAny(p reconciler.Plan, failures map[render.Key]error) bool {
	for _, d := range p.ToCreate {
		if failures[d.Key] == nil {
			return true
		}
	}
	for _, u := range p.ToUpdate {
		if failures[u.Desired.Key] == nil {
			return true
		}
	}
	return false
}

// eligibleSince is when a pod could first have had its declared entries: once it was
// scheduled, and once the resources declaring them existed, so that a ClusterSPIFFEID created
// for pods that ran long before it does not count their age. It is zero for a pod that is not
// scheduled.
func eligibleSince(pod *corev1.Pod, declared []*render.DeclaredEntry) time.Time {
	since := metrics.PodEligibleSince(pod)
	if since.IsZero() {
		return since
	}
	for _, d := range declared {
		if d.Declarer.PodUID == pod.UID && d.Declarer.Created.After(since) {
			since = d.Declarer.Created
		}
	}
	return since
}
