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
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// staticKeys remembers the entry key each ClusterStaticEntry declared when last synced, so
// that an edit that changes the key also cleans up the entry of the old key.
type staticKeys struct {
	mu   sync.Mutex
	keys map[string]entryKey
}

func (s *staticKeys) swap(name string, k entryKey) (entryKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.keys[name]
	if k == "" {
		delete(s.keys, name)
	} else {
		s.keys[name] = k
	}
	return prev, ok
}

// reset records the keys of a full resync's static entries.
func (s *staticKeys) reset(declared []*declaredEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = make(map[string]entryKey, len(declared))
	for _, d := range declared {
		s.keys[d.declarer.name] = d.key
	}
}

// declaredStatics renders every ClusterStaticEntry of this controller's class. Invalid ones
// are returned with their error and declare nothing.
func (c *Controller) declaredStatics() ([]*declaredEntry, map[string]error, error) {
	all, err := c.staticLister.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing ClusterStaticEntries: %w", err)
	}
	var declared []*declaredEntry
	invalid := map[string]error{}
	for _, cse := range all {
		if cse.DeletionTimestamp != nil || !c.opts.ClassMatches(cse.Spec.ClassName) {
			continue
		}
		e, err := c.renderer.renderStaticEntry(&cse.Spec)
		if err != nil {
			invalid[cse.Name] = err
			metrics.RenderFailures.WithLabelValues(kindClusterStaticEntry).Inc()
			continue
		}
		declared = append(declared, newDeclaredEntry(e, declarer{kind: kindClusterStaticEntry, name: cse.Name, created: cse.CreationTimestamp.Time}))
	}
	return declared, invalid, nil
}

// syncStatic makes SPIRE hold what a ClusterStaticEntry declares. Its scope is the entry key it
// declares now and the one it declared before: every static entry of those keys takes part, so
// the oldest declarer wins and the rest are masked, as in a full resync.
func (c *Controller) syncStatic(ctx context.Context, name string) error {
	c.resyncLock.RLock()
	defer c.resyncLock.RUnlock()

	declared, invalid, err := c.declaredStatics()
	if err != nil {
		return err
	}
	var key entryKey
	for _, d := range declared {
		if d.declarer.name == name {
			key = d.key
		}
	}
	scope := []entryKey{}
	if key != "" {
		scope = append(scope, key)
	}
	if prev, ok := c.staticKeys.swap(name, key); ok && prev != key {
		scope = append(scope, prev)
	}

	var errs []error
	for _, k := range scope {
		var inScope []*declaredEntry
		for _, d := range declared {
			if d.key == k {
				inScope = append(inScope, d)
			}
		}
		p := reconcile(inScope, c.entries.forKey(k))
		failures, err := c.finalize(ctx, p)
		if err != nil {
			errs = append(errs, err)
		}
		for statusName, status := range staticStatuses(p, failures) {
			if err := c.writeStaticStatus(ctx, statusName, status, nil); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err, ok := invalid[name]; ok {
		if err := c.writeStaticStatus(ctx, name, spirev1alpha1.ClusterStaticEntryStatus{}, err); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("syncing ClusterStaticEntry %s: %v", name, errs)
	}
	return nil
}

// staticStatuses computes the status of every ClusterStaticEntry that takes part in a plan.
func staticStatuses(p plan, failures map[entryKey]error) map[string]spirev1alpha1.ClusterStaticEntryStatus {
	out := map[string]spirev1alpha1.ClusterStaticEntryStatus{}
	set := func(d *declaredEntry, masked bool) {
		if d.declarer.kind != kindClusterStaticEntry {
			return
		}
		out[d.declarer.name] = spirev1alpha1.ClusterStaticEntryStatus{
			Rendered: true,
			Masked:   masked,
			Set:      !masked && failures[d.key] == nil,
		}
	}
	for _, d := range p.toCreate {
		set(d, false)
	}
	for _, u := range p.toUpdate {
		set(u.desired, false)
	}
	for _, d := range p.inSync {
		set(d, false)
	}
	for _, d := range p.masked {
		set(d, true)
	}
	return out
}

// writeStaticStatus writes a ClusterStaticEntry's status when it changed, with an Event when it
// became invalid or masked. renderErr is why it is invalid, if it is.
func (c *Controller) writeStaticStatus(ctx context.Context, name string, status spirev1alpha1.ClusterStaticEntryStatus, renderErr error) error {
	cse, err := c.staticLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("getting ClusterStaticEntry %s: %w", name, err)
	}
	// An invalid spec is reported at every sync (client-go aggregates repeats), since its
	// status alone, all false, does not say why.
	if renderErr != nil {
		c.recorder.Eventf(cse, corev1.EventTypeWarning, "InvalidSpec", "Entry not written: %s", truncate(renderErr.Error(), 512))
	}
	if cse.Status == status {
		return nil
	}
	if status.Masked {
		c.recorder.Event(cse, corev1.EventTypeWarning, "Masked", "An older resource declares the same entry (SPIFFE ID, parent ID and selectors); this one is not written")
	}
	updated := cse.DeepCopy()
	updated.Status = status
	if _, err := c.spireAPI.SpireV1alpha1().ClusterStaticEntries().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of ClusterStaticEntry %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated ClusterStaticEntry status", "clusterStaticEntry", name, "status", status)
	return nil
}
