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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirelisters "github.com/spire-registrar/spire-registrar/generated/listers/spire/v1alpha1"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// clusterStaticEntries is the controller's ClusterStaticEntry side: their lister, the queue
// of names to sync (one worker: syncClusterStaticEntry relies on it), those waiting for SPIRE
// to answer, and their status.
type clusterStaticEntries struct {
	lister  spirelisters.ClusterStaticEntryLister
	queue   workqueue.TypedRateLimitingInterface[string]
	parking *runner.Parking[string]
	status  *runner.StatusWriter[*spirev1alpha1.ClusterStaticEntry]
}

func newClusterStaticEntries(lister spirelisters.ClusterStaticEntryLister, status *runner.StatusWriter[*spirev1alpha1.ClusterStaticEntry],
	probe func(context.Context) error) *clusterStaticEntries {
	const name = "spire_registrar_clusterstaticentries"
	queue := runner.NewQueue[string](name, 50, 500)
	return &clusterStaticEntries{lister: lister, queue: queue, parking: runner.NewParking(name, queue, probe), status: status}
}

// addClusterStaticEntryEventHandlers maps ClusterStaticEntry events to their names, and to
// the names of the resources that take over an entry one leaves.
func (c *Controller) addClusterStaticEntryEventHandlers(informer spireinformers.ClusterStaticEntryInformer) error {
	return c.handlers.Add(informer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueClusterStaticEntry,
		UpdateFunc: c.onClusterStaticEntryUpdate,
		DeleteFunc: func(obj any) {
			c.enqueueClusterStaticEntry(obj)
			c.enqueueClusterStaticEntryTwins(obj)
		},
	})
}

func (c *Controller) enqueueClusterStaticEntry(obj any) {
	if cse, ok := runner.Unwrap[*spirev1alpha1.ClusterStaticEntry](obj); ok {
		c.clusterStaticEntries.queue.Add(cse.Name)
	}
}

// onClusterStaticEntryUpdate skips the echoes of the controller's own status writes; the start
// of a deletion changes which declarer is preferred.
func (c *Controller) onClusterStaticEntryUpdate(oldObj, newObj any) {
	oldCSE, newCSE := oldObj.(*spirev1alpha1.ClusterStaticEntry), newObj.(*spirev1alpha1.ClusterStaticEntry)
	if oldCSE.Generation != newCSE.Generation || oldCSE.UID != newCSE.UID || !oldCSE.DeletionTimestamp.Equal(newCSE.DeletionTimestamp) {
		c.enqueueClusterStaticEntry(newCSE)
	}
	if oldCSE.Generation != newCSE.Generation || oldCSE.UID != newCSE.UID {
		c.enqueueClusterStaticEntryTwins(oldCSE)
	}
}

// enqueueClusterStaticEntryTwins queues the other ClusterStaticEntries of this class that
// declare the entry key obj declared: once obj declares another key, or none, one of them
// takes the entry over, and its status must say so. The key comes from the event's old
// object, not from memory of a sync, so a failed write cannot lose it. Static entries are
// few, and rendering one is cheap.
func (c *Controller) enqueueClusterStaticEntryTwins(obj any) {
	gone, ok := runner.Unwrap[*spirev1alpha1.ClusterStaticEntry](obj)
	if !ok || !c.opts.Class.Matches(gone.Spec.ClassName) {
		return
	}
	declared, err := c.renderer.StaticEntry(gone)
	if err != nil {
		return
	}
	all, err := c.clusterStaticEntries.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, other := range all {
		if other.Name == gone.Name || !c.opts.Class.Matches(other.Spec.ClassName) {
			continue
		}
		if d, err := c.renderer.StaticEntry(other); err == nil && d.Key == declared.Key {
			c.clusterStaticEntries.queue.Add(other.Name)
		}
	}
}

// enqueueAllClusterStaticEntries queues every ClusterStaticEntry: they are few, and a sync
// of each also brings its status up to date.
func (c *Controller) enqueueAllClusterStaticEntries() {
	all, err := c.clusterStaticEntries.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, cse := range all {
		c.clusterStaticEntries.queue.Add(cse.Name)
	}
}

// declaredClusterStaticEntries renders every ClusterStaticEntry of this controller's class.
// Invalid ones are returned with their error and declare nothing.
func (c *Controller) declaredClusterStaticEntries() ([]*render.DeclaredEntry, map[string]error, error) {
	if c.opts.SkipClusterStaticEntries {
		return nil, nil, nil
	}
	all, err := c.clusterStaticEntries.lister.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing ClusterStaticEntries: %w", err)
	}
	var declared []*render.DeclaredEntry
	invalid := map[string]error{}
	for _, cse := range all {
		// Those being deleted take part until they are gone, as in spire-controller-manager.
		if !c.opts.Class.Matches(cse.Spec.ClassName) {
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

// syncClusterStaticEntry makes SPIRE hold what a ClusterStaticEntry declares. Its scope is the
// entry key it declares now and every key of no pod that SPIRE holds an entry of but nothing
// declares: what this or another resource declared before an edit or a delete. That scope is
// derived from the entry cache, which moves only with writes SPIRE took, so a retry after a
// failed write still sees the old key. Every static entry of those keys takes part, so the
// oldest declarer wins and the rest are masked, as in a full resync.
func (c *Controller) syncClusterStaticEntry(ctx context.Context, name string) error {
	// The cache is read before the lister: an entry is cached only after a sync saw its
	// resource in the lister, so no entry of a resource the lister holds is taken for left
	// over. The queue's single worker keeps two of these syncs from interleaving.
	held := c.reconciler.KeysOfNoPod()
	declared, invalid, err := c.declaredClusterStaticEntries()
	if err != nil {
		return err
	}
	declaredKeys := sets.New[render.Key]()
	var key render.Key
	for _, d := range declared {
		declaredKeys.Insert(d.Key)
		if d.Declarer.Name == name {
			key = d.Key
		}
	}
	var scope []render.Key
	if key != "" {
		scope = append(scope, key)
	}
	for _, k := range held {
		if !declaredKeys.Has(k) {
			scope = append(scope, k)
		}
	}

	var errs []error
	if len(scope) > 0 {
		res, err := c.reconciler.Sync(ctx, reconciler.KeyScope(scope...), declared)
		if err != nil {
			errs = append(errs, err)
		}
		for statusName, outcome := range clusterStaticEntryOutcomes(res) {
			if err := c.updateClusterStaticEntryStatus(ctx, statusName, outcome); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err, ok := invalid[name]; ok {
		if err := c.updateClusterStaticEntryStatus(ctx, name, clusterStaticEntryOutcome{err: err}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("syncing ClusterStaticEntry %s: %w", name, errors.Join(errs...))
	}
	return nil
}

// clusterStaticEntryOutcome is what became of one ClusterStaticEntry: whether it rendered,
// lost to an older twin, or is in SPIRE; err says why it did not render or could not be
// written.
type clusterStaticEntryOutcome struct {
	rendered, masked, set bool
	err                   error
}

// clusterStaticEntryOutcomes computes the outcome of every ClusterStaticEntry that takes part
// in a sync.
func clusterStaticEntryOutcomes(res reconciler.Result) map[string]clusterStaticEntryOutcome {
	out := map[string]clusterStaticEntryOutcome{}
	for d, o := range res.Plan.Outcomes(res.Failures) {
		if d.Declarer.Kind != render.KindClusterStaticEntry {
			continue
		}
		co := clusterStaticEntryOutcome{rendered: true, masked: o == reconciler.OutcomeMasked, set: o == reconciler.OutcomeSet}
		if o == reconciler.OutcomeEntryFailure {
			co.err = res.Failures[d.Key]
		}
		out[d.Declarer.Name] = co
	}
	return out
}

// updateClusterStaticEntryStatus writes a ClusterStaticEntry's status when it changed. An
// invalid spec or a failed write is also told in a Warning Event at every sync (client-go
// aggregates repeats); masking, when it starts. A dry run or static mode writes no status.
func (c *Controller) updateClusterStaticEntryStatus(ctx context.Context, name string, o clusterStaticEntryOutcome) error {
	statics := c.clusterStaticEntries
	cse, err := statics.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("getting ClusterStaticEntry %s: %w", name, err)
	}
	ready := o.readyCondition(cse.Generation)
	if ready.Reason == spirev1alpha1.ReasonInvalidSpec || ready.Reason == spirev1alpha1.ReasonWriteFailed {
		c.events.Recorder.Event(cse, corev1.EventTypeWarning, ready.Reason, ready.Message)
	}
	changed, err := statics.status.Write(ctx, cse, func(updated *spirev1alpha1.ClusterStaticEntry) {
		updated.Status.Rendered, updated.Status.Masked, updated.Status.Set = o.rendered, o.masked, o.set
	}, ready)
	if changed && o.masked && !cse.Status.Masked {
		c.events.Recorder.Event(cse, corev1.EventTypeWarning, spirev1alpha1.ReasonMasked, ready.Message)
	}
	return err
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
