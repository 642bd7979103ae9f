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
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/podcache"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// This file holds the only two status writers of the controller, one per kind. Neither writes
// without an API (static mode) or in a dry run, which writes nothing anywhere.

// writesStatus reports whether status may be written.
func (c *Controller) writesStatus() bool {
	return c.spireAPI != nil && !c.opts.DryRun
}

// enqueueStatus schedules the status of ClusterSPIFFEIDs whose counters changed, paced by
// what counting them costs.
func (c *Controller) enqueueStatus(names []string) {
	if len(names) == 0 {
		return
	}
	delay := c.statusPacer.delay()
	for _, name := range names {
		c.statusQueue.AddAfter(name, delay)
	}
}

// syncClusterSPIFFEIDStatus writes a ClusterSPIFFEID's stats when they changed. They count
// what spire-controller-manager 0.7.0 counts, so that dashboards and alerts keep their
// meaning: namespace and pod counts from the listers, per-pod outcomes from the reconciler's
// status counters. A spec that does not compile counts nothing, as there; its Ready condition
// says why.
func (c *Controller) syncClusterSPIFFEIDStatus(ctx context.Context, name string) error {
	start := time.Now()
	clusterSPIFFEID, err := c.clusterSPIFFEIDLister.Get(name)
	if apierrors.IsNotFound(err) {
		forgetEntryOutcomes(name)
		c.statusPacer.forget(name)
		return nil
	} else if err != nil {
		return fmt.Errorf("getting ClusterSPIFFEID %s: %w", name, err)
	}
	if !c.opts.ClassMatches(clusterSPIFFEID.Spec.ClassName) {
		forgetEntryOutcomes(name)
		c.statusPacer.forget(name)
		return nil
	}
	compiled := c.clusterSPIFFEIDs.get(clusterSPIFFEID)
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	var unscheduled int
	if compiled.Err == nil {
		if unscheduled, err = c.selectionStats(compiled, &stats); err != nil {
			return err
		}
		c.reconciler.StatusCounters().Stats(name, &stats)
	}
	c.statusPacer.observe(name, time.Since(start))
	recordEntryOutcomes(name, stats, unscheduled)
	updated := clusterSPIFFEID.DeepCopy()
	updated.Status.Stats = stats
	c.clusterSPIFFEIDConditions.Set(&updated.Status.Conditions, clusterSPIFFEIDReadyCondition(compiled, stats, unscheduled, clusterSPIFFEID.Generation))
	if apiequality.Semantic.DeepEqual(clusterSPIFFEID.Status, updated.Status) || !c.writesStatus() {
		return nil
	}
	echo, err := c.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating status of ClusterSPIFFEID %s: %w", name, err)
	}
	c.clusterSPIFFEIDConditions.Learn(updated.Status.Conditions, echo.Status.Conditions)
	klog.FromContext(ctx).V(2).Info("Updated ClusterSPIFFEID status", "stats", stats)
	return nil
}

// clusterSPIFFEIDReadyCondition summarises a ClusterSPIFFEID's stats in a Ready condition with
// a reason and a message a person can act on. Pods that only wait for a node count as render
// failures in the stats, as in spire-controller-manager, but do not make it not Ready.
func clusterSPIFFEIDReadyCondition(compiled *render.ClusterSPIFFEID, stats spirev1alpha1.ClusterSPIFFEIDStats, unscheduled int, generation int64) metav1.Condition {
	c := metav1.Condition{Type: spirev1alpha1.ConditionReady, ObservedGeneration: generation, Status: metav1.ConditionFalse}
	failures := stats.PodEntryRenderFailures - min(unscheduled, stats.PodEntryRenderFailures)
	switch {
	case compiled.Err != nil:
		c.Reason = spirev1alpha1.ReasonInvalidSpec
		c.Message = "No entry can be rendered: " + runner.Truncate(compiled.Err.Error(), 1024)
	case failures > 0:
		c.Reason = spirev1alpha1.ReasonRenderFailed
		c.Message = fmt.Sprintf("%d of %d selected pods have no entry: the templates render no valid entry for them (see the RenderFailed Events)",
			failures, stats.PodsSelected)
	case stats.EntryFailures > 0:
		c.Reason = spirev1alpha1.ReasonWriteFailed
		c.Message = fmt.Sprintf("SPIRE did not take %d of %d entries; they are retried", stats.EntryFailures, stats.EntriesToSet)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, spirev1alpha1.ReasonEntriesSet
		c.Message = fmt.Sprintf("SPIRE holds the entries of all %d selected pods", stats.EntriesToSet)
		if stats.EntriesMasked > 0 {
			c.Message += fmt.Sprintf("; %d more are masked by older resources declaring the same entries", stats.EntriesMasked)
		}
	}
	if unscheduled > 0 && compiled.Err == nil {
		c.Message += fmt.Sprintf("; %d selected pods wait for a node (counted in podEntryRenderFailures)", unscheduled)
	}
	return c
}

// selectionStats counts, as spire-controller-manager does, the namespaces a ClusterSPIFFEID
// selects (ignored ones included), the ignored ones among them, and the pods it selects in the
// others, whatever their phase and whether or not a fallback is skipped for them. It returns
// how many of those pods are not scheduled yet.
func (c *Controller) selectionStats(compiled *render.ClusterSPIFFEID, stats *spirev1alpha1.ClusterSPIFFEIDStats) (int, error) {
	namespaces, err := c.namespaceLister.List(compiled.NamespaceSelector)
	if err != nil {
		return 0, fmt.Errorf("listing namespaces: %w", err)
	}
	unscheduled := 0
	stats.NamespacesSelected = len(namespaces)
	for _, ns := range namespaces {
		if c.opts.IgnoreNamespace(ns.Name) {
			stats.NamespacesIgnored++
			continue
		}
		if err := c.eachPodIn(ns.Name, compiled.PodSelector, func(pod podcache.View) {
			stats.PodsSelected++
			if pod.NodeName == "" && render.PhaseDeclaresEntries(pod.Phase) {
				unscheduled++
			}
		}); err != nil {
			return 0, err
		}
	}
	return unscheduled, nil
}

// updateClusterStaticEntryStatus writes a ClusterStaticEntry's status when it changed. An
// invalid spec or a failed write is also told in a Warning Event at every sync (client-go
// aggregates repeats); masking, when it starts.
func (c *Controller) updateClusterStaticEntryStatus(ctx context.Context, name string, o clusterStaticEntryOutcome) error {
	cse, err := c.clusterStaticEntryLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("getting ClusterStaticEntry %s: %w", name, err)
	}
	ready := o.readyCondition(cse.Generation)
	if ready.Reason == spirev1alpha1.ReasonInvalidSpec || ready.Reason == spirev1alpha1.ReasonWriteFailed {
		c.events.Recorder.Event(cse, corev1.EventTypeWarning, ready.Reason, ready.Message)
	}
	updated := cse.DeepCopy()
	updated.Status.Rendered, updated.Status.Masked, updated.Status.Set = o.rendered, o.masked, o.set
	c.clusterStaticEntryConditions.Set(&updated.Status.Conditions, ready)
	if apiequality.Semantic.DeepEqual(cse.Status, updated.Status) {
		return nil
	}
	if o.masked && !cse.Status.Masked {
		c.events.Recorder.Event(cse, corev1.EventTypeWarning, spirev1alpha1.ReasonMasked, ready.Message)
	}
	if !c.writesStatus() {
		return nil
	}
	echo, err := c.spireAPI.SpireV1alpha1().ClusterStaticEntries().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating status of ClusterStaticEntry %s: %w", name, err)
	}
	c.clusterStaticEntryConditions.Learn(updated.Status.Conditions, echo.Status.Conditions)
	klog.FromContext(ctx).V(2).Info("Updated ClusterStaticEntry status", "clusterStaticEntry", name, "ready", ready.Status, "reason", ready.Reason)
	return nil
}

// readyCondition is the Ready condition a ClusterStaticEntry's outcome amounts to.
func (o clusterStaticEntryOutcome) readyCondition(generation int64) metav1.Condition {
	c := metav1.Condition{Type: spirev1alpha1.ConditionReady, ObservedGeneration: generation, Status: metav1.ConditionFalse}
	switch {
	case !o.rendered:
		c.Reason, c.Message = spirev1alpha1.ReasonInvalidSpec, "The entry is not written: "+runner.Truncate(errString(o.err), 1024)
	case o.masked:
		c.Reason, c.Message = spirev1alpha1.ReasonMasked, "An older resource declares the same entry (SPIFFE ID, parent ID and selectors); it is the one written"
	case !o.set:
		c.Reason, c.Message = spirev1alpha1.ReasonWriteFailed, "SPIRE did not take the entry: "+runner.Truncate(errString(o.err), 1024)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, spirev1alpha1.ReasonEntrySet, "SPIRE holds the entry as declared"
	}
	return c
}

func errString(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}
