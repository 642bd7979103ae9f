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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// syncIdentity fans a ClusterSPIFFEID change out to the pods it affects: those it applied to
// before, as the outcome tracker remembers, and those it selects now.
func (c *Controller) syncIdentity(ctx context.Context, name string) error {
	before := c.outcomes.pods(name)
	csid, err := c.csidLister.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		c.identities.forget(name)
		c.enqueuePodUIDs(before)
		return nil
	case err != nil:
		return fmt.Errorf("getting ClusterSPIFFEID %s: %w", name, err)
	}
	c.enqueuePodUIDs(before)
	if !c.opts.ClassMatches(csid.Spec.ClassName) {
		return nil
	}
	now, err := c.selectedPods(c.identities.get(csid))
	if err != nil {
		return err
	}
	c.enqueuePodUIDs(now)
	klog.FromContext(ctx).V(2).Info("Fanned out ClusterSPIFFEID change", "podsBefore", len(before), "podsNow", len(now))
	return nil
}

// selectedPods returns the pods an identity's selectors match outside ignored namespaces.
func (c *Controller) selectedPods(id *podIdentity) ([]types.UID, error) {
	namespaces, err := c.namespaceLister.List(id.namespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	var uids []types.UID
	for _, ns := range namespaces {
		if c.opts.IgnoreNamespace(ns.Name) {
			continue
		}
		pods, err := c.podLister.Pods(ns.Name).List(id.podSelector)
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
	csid, err := c.csidLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("getting ClusterSPIFFEID %s: %w", name, err)
	}
	if !c.opts.ClassMatches(csid.Spec.ClassName) {
		return nil
	}
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	if err := c.namespaceStats(c.identities.get(csid), &stats); err != nil {
		return err
	}
	c.outcomes.stats(name, &stats)
	if csid.Status.Stats == stats {
		return nil
	}
	updated := csid.DeepCopy()
	updated.Status.Stats = stats
	if _, err := c.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of ClusterSPIFFEID %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated ClusterSPIFFEID status", "stats", stats)
	return nil
}

// namespaceStats counts the namespaces an identity selects and, of those, the ignored ones.
func (c *Controller) namespaceStats(id *podIdentity, stats *spirev1alpha1.ClusterSPIFFEIDStats) error {
	namespaces, err := c.namespaceLister.List(id.namespaceSelector)
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
