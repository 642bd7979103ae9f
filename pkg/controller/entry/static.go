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
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// staticKeys remembers the entry key each ClusterStaticEntry declared when last synced, so
// that an edit that changes the key also cleans up the entry of the old key.
type staticKeys struct {
	mu   sync.Mutex
	keys map[string]render.Key
}

func (s *staticKeys) swap(name string, k render.Key) (render.Key, bool) {
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
func (s *staticKeys) reset(declared []*render.DeclaredEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = make(map[string]render.Key, len(declared))
	for _, d := range declared {
		s.keys[d.Declarer.Name] = d.Key
	}
}

// declaredStatics renders every ClusterStaticEntry of this controller's class. Invalid ones
// are returned with their error and declare nothing.
func (c *Controller) declaredStatics() ([]*render.DeclaredEntry, map[string]error, error) {
	if c.opts.IgnoreClusterStaticEntries {
		return nil, nil, nil
	}
	all, err := c.staticLister.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing ClusterStaticEntries: %w", err)
	}
	var declared []*render.DeclaredEntry
	invalid := map[string]error{}
	for _, cse := range all {
		if cse.DeletionTimestamp != nil || !c.opts.ClassMatches(cse.Spec.ClassName) {
			continue
		}
		d, err := c.renderer.StaticEntry(cse)
		if err != nil {
			invalid[cse.Name] = err
			metrics.RenderFailures.WithLabelValues(render.KindClusterStaticEntry).Inc()
			continue
		}
		declared = append(declared, d)
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
	var key render.Key
	for _, d := range declared {
		if d.Declarer.Name == name {
			key = d.Key
		}
	}
	scope := []render.Key{}
	if key != "" {
		scope = append(scope, key)
	}
	if prev, ok := c.staticKeys.swap(name, key); ok && prev != key {
		scope = append(scope, prev)
	}

	var errs []error
	for _, k := range scope {
		var inScope []*render.DeclaredEntry
		for _, d := range declared {
			if d.Key == k {
				inScope = append(inScope, d)
			}
		}
		p := reconcile(inScope, c.entries.forKey(k), c.fieldSupport.get())
		failures, err := c.finalize(ctx, p)
		if err != nil {
			errs = append(errs, err)
		}
		for statusName, outcome := range staticOutcomes(p, failures) {
			if err := c.writeStaticStatus(ctx, statusName, outcome); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err, ok := invalid[name]; ok {
		if err := c.writeStaticStatus(ctx, name, staticOutcome{err: err}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("syncing ClusterStaticEntry %s: %v", name, errs)
	}
	return nil
}

// staticOutcome is what became of one ClusterStaticEntry: whether it rendered, lost to an
// older twin, or is in SPIRE; err says why it did not render or could not be written.
type staticOutcome struct {
	rendered, masked, set bool
	err                   error
}

// staticOutcomes computes the outcome of every ClusterStaticEntry that takes part in a plan.
func staticOutcomes(p plan, failures map[render.Key]error) map[string]staticOutcome {
	out := map[string]staticOutcome{}
	add := func(d *render.DeclaredEntry, masked bool) {
		if d.Declarer.Kind != render.KindClusterStaticEntry {
			return
		}
		o := staticOutcome{rendered: true, masked: masked}
		if !masked {
			o.err = failures[d.Key]
			o.set = o.err == nil
		}
		out[d.Declarer.Name] = o
	}
	for _, d := range p.toCreate {
		add(d, false)
	}
	for _, u := range p.toUpdate {
		add(u.desired, false)
	}
	for _, d := range p.inSync {
		add(d, false)
	}
	for _, d := range p.masked {
		add(d, true)
	}
	return out
}

// readyCondition is the Ready condition an outcome amounts to.
func (o staticOutcome) readyCondition(generation int64) metav1.Condition {
	c := metav1.Condition{Type: conditionReady, ObservedGeneration: generation, Status: metav1.ConditionFalse}
	switch {
	case !o.rendered:
		c.Reason, c.Message = "InvalidSpec", "The entry is not written: "+truncate(errString(o.err), 1024)
	case o.masked:
		c.Reason, c.Message = "Masked", "An older resource declares the same entry (SPIFFE ID, parent ID and selectors); it is the one written"
	case !o.set:
		c.Reason, c.Message = "WriteFailed", "SPIRE did not take the entry: "+truncate(errString(o.err), 1024)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "EntrySet", "SPIRE holds the entry as declared"
	}
	return c
}

func errString(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// writeStaticStatus writes a ClusterStaticEntry's status when it changed. An invalid spec or a
// failed write is also told in a Warning Event at every sync (client-go aggregates repeats);
// masking, when it starts.
func (c *Controller) writeStaticStatus(ctx context.Context, name string, o staticOutcome) error {
	cse, err := c.staticLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("getting ClusterStaticEntry %s: %w", name, err)
	}
	ready := o.readyCondition(cse.Generation)
	if ready.Reason == "InvalidSpec" || ready.Reason == "WriteFailed" {
		c.recorder.Event(cse, corev1.EventTypeWarning, ready.Reason, ready.Message)
	}
	updated := cse.DeepCopy()
	updated.Status.Rendered, updated.Status.Masked, updated.Status.Set = o.rendered, o.masked, o.set
	meta.SetStatusCondition(&updated.Status.Conditions, ready)
	if apiequality.Semantic.DeepEqual(cse.Status, updated.Status) {
		return nil
	}
	if o.masked && !cse.Status.Masked {
		c.recorder.Event(cse, corev1.EventTypeWarning, "Masked", ready.Message)
	}
	if c.spireAPI == nil {
		return nil
	}
	if _, err := c.spireAPI.SpireV1alpha1().ClusterStaticEntries().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of ClusterStaticEntry %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated ClusterStaticEntry status", "clusterStaticEntry", name, "ready", ready.Status, "reason", ready.Reason)
	return nil
}
