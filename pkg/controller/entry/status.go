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

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// syncClusterSPIFFEID fans a ClusterSPIFFEID change out to the pods it affects: those it applied to
// before, as the outcome tracker remembers, and those it selects now.
func (c *Controller) syncClusterSPIFFEID(ctx context.Context, name string) error {
	before := c.outcomes.pods(name)
	csid, err := c.clusterSPIFFEIDLister.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		c.clusterSPIFFEIDs.forget(name)
		c.enqueuePodUIDs(before)
		return nil
	case err != nil:
		return fmt.Errorf("getting ClusterSPIFFEID %s: %w", name, err)
	}
	c.enqueuePodUIDs(before)
	if !c.opts.ClassMatches(csid.Spec.ClassName) {
		return nil
	}
	now, err := c.selectedPods(c.clusterSPIFFEIDs.get(csid))
	if err != nil {
		return err
	}
	c.enqueuePodUIDs(now)
	klog.FromContext(ctx).V(2).Info("Fanned out ClusterSPIFFEID change", "podsBefore", len(before), "podsNow", len(now))
	return nil
}

// selectedPods returns the pods an identity's selectors match outside ignored namespaces.
func (c *Controller) selectedPods(id *render.ClusterSPIFFEID) ([]types.UID, error) {
	namespaces, err := c.namespaceLister.List(id.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	var uids []types.UID
	for _, ns := range namespaces {
		if c.opts.IgnoreNamespace(ns.Name) {
			continue
		}
		pods, err := c.podLister.Pods(ns.Name).List(id.PodSelector)
		if err != nil {
			return nil, fmt.Errorf("listing pods of %s: %w", ns.Name, err)
		}
		for _, pod := range pods {
			uids = append(uids, pod.UID)
		}
	}
	return uids, nil
}

// syncStatus writes a ClusterSPIFFEID's stats when they changed: namespace counts from the
// listers, per-pod counts from the outcome tracker.
func (c *Controller) syncStatus(ctx context.Context, name string) error {
	csid, err := c.clusterSPIFFEIDLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("getting ClusterSPIFFEID %s: %w", name, err)
	}
	if !c.opts.ClassMatches(csid.Spec.ClassName) {
		return nil
	}
	id := c.clusterSPIFFEIDs.get(csid)
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	if err := c.namespaceStats(id, &stats); err != nil {
		return err
	}
	c.outcomes.stats(name, &stats)
	updated := csid.DeepCopy()
	updated.Status.Stats = stats
	meta.SetStatusCondition(&updated.Status.Conditions, clusterSPIFFEIDReadyCondition(id, stats, csid.Generation))
	if apiequality.Semantic.DeepEqual(csid.Status, updated.Status) {
		return nil
	}
	if c.spireAPI == nil {
		return nil
	}
	if _, err := c.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of ClusterSPIFFEID %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated ClusterSPIFFEID status", "stats", stats)
	return nil
}

// conditionReady is the condition type that says whether a resource's entries are in SPIRE.
const conditionReady = "Ready"

// clusterSPIFFEIDReadyCondition summarises a ClusterSPIFFEID's stats in a Ready condition with a
// reason and a message a person can act on.
func clusterSPIFFEIDReadyCondition(id *render.ClusterSPIFFEID, stats spirev1alpha1.ClusterSPIFFEIDStats, generation int64) metav1.Condition {
	c := metav1.Condition{Type: conditionReady, ObservedGeneration: generation, Status: metav1.ConditionFalse}
	switch {
	case id.Err != nil:
		c.Reason = "InvalidSpec"
		c.Message = "No entry can be rendered: " + truncate(id.Err.Error(), 1024)
	case stats.PodEntryRenderFailures > 0:
		c.Reason = "RenderFailed"
		c.Message = fmt.Sprintf("%d of %d selected pods have no entry: the templates render no valid entry for them (see the RenderFailed Events)",
			stats.PodEntryRenderFailures, stats.PodsSelected)
	case stats.EntryFailures > 0:
		c.Reason = "WriteFailed"
		c.Message = fmt.Sprintf("SPIRE did not take %d of %d entries; they are retried", stats.EntryFailures, stats.EntriesToSet)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, "EntriesSet"
		c.Message = fmt.Sprintf("SPIRE holds the entries of all %d selected pods", stats.EntriesToSet)
		if stats.EntriesMasked > 0 {
			c.Message += fmt.Sprintf("; %d more are masked by older resources declaring the same entries", stats.EntriesMasked)
		}
	}
	return c
}

// namespaceStats counts the namespaces an identity selects and, of those, the ignored ones.
func (c *Controller) namespaceStats(id *render.ClusterSPIFFEID, stats *spirev1alpha1.ClusterSPIFFEIDStats) error {
	namespaces, err := c.namespaceLister.List(id.NamespaceSelector)
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range namespaces {
		if c.opts.IgnoreNamespace(ns.Name) {
			stats.NamespacesIgnored++
		} else {
			stats.NamespacesSelected++
		}
	}
	return nil
}
