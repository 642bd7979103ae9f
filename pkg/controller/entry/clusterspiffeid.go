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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	spirelisters "github.com/spire-registrar/spire-registrar/generated/listers/spire/v1alpha1"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// clusterSPIFFEIDs is the controller's ClusterSPIFFEID side: their lister, their compiled
// forms, the queue of those whose change fans out to pods, and their status.
type clusterSPIFFEIDs struct {
	lister   spirelisters.ClusterSPIFFEIDLister
	compiled *render.CompiledClusterSPIFFEIDs
	fanOut   workqueue.TypedRateLimitingInterface[string]
	status   *clusterSPIFFEIDStatus
}

func newClusterSPIFFEIDs(lister spirelisters.ClusterSPIFFEIDLister, status *runner.StatusWriter[*spirev1alpha1.ClusterSPIFFEID]) *clusterSPIFFEIDs {
	return &clusterSPIFFEIDs{
		lister:   lister,
		compiled: render.NewCompiledClusterSPIFFEIDs(),
		fanOut:   runner.NewQueue[string]("spire_registrar_clusterspiffeids", 50, 500),
		status:   newClusterSPIFFEIDStatus(status),
	}
}

// eventHandler fans out spec changes, creations, deletions and the start of a deletion, which
// changes which declarer is preferred; the controller's own status writes come back as
// updates with the same generation. Those of the informer's initial list only need their
// status written: the initial full resync declares their pods.
func (c *clusterSPIFFEIDs) eventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if isInInitialList {
				c.status.enqueueNow(obj)
				return
			}
			c.enqueue(obj)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, cur := oldObj.(*spirev1alpha1.ClusterSPIFFEID), newObj.(*spirev1alpha1.ClusterSPIFFEID)
			if old.Generation != cur.Generation || old.UID != cur.UID || !old.DeletionTimestamp.Equal(cur.DeletionTimestamp) {
				c.enqueue(cur)
			}
		},
		DeleteFunc: c.enqueue,
	}
}

func (c *clusterSPIFFEIDs) enqueue(obj any) {
	if clusterSPIFFEID, ok := runner.Unwrap[*spirev1alpha1.ClusterSPIFFEID](obj); ok {
		c.fanOut.Add(clusterSPIFFEID.Name)
	}
	c.status.enqueueNow(obj)
}

// syncClusterSPIFFEID fans a ClusterSPIFFEID change out to the pods it affects: those it
// applied to before, as the reconciler's status counters remember, and those it selects now.
func (c *Controller) syncClusterSPIFFEID(ctx context.Context, name string) error {
	before := c.reconciler.StatusCounters().Pods(name)
	clusterSPIFFEID, err := c.clusterSPIFFEIDs.lister.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		c.clusterSPIFFEIDs.compiled.Forget(name)
		c.enqueuePodUIDs(before)
		return nil
	case err != nil:
		return fmt.Errorf("getting ClusterSPIFFEID %s: %w", name, err)
	}
	c.enqueuePodUIDs(before)
	if !c.opts.Class.Matches(clusterSPIFFEID.Spec.ClassName) {
		return nil
	}
	now, err := c.selectedPods(c.clusterSPIFFEIDs.compiled.Get(clusterSPIFFEID))
	if err != nil {
		return err
	}
	c.enqueuePodUIDs(now)
	klog.FromContext(ctx).V(2).Info("Fanned out ClusterSPIFFEID change", "podsBefore", len(before), "podsNow", len(now))
	return nil
}

// selectedPods returns the pods a ClusterSPIFFEID's selectors match outside ignored
// namespaces.
func (c *Controller) selectedPods(clusterSPIFFEID *render.ClusterSPIFFEID) ([]types.UID, error) {
	var uids []types.UID
	err := c.eachSelectedNamespace(clusterSPIFFEID, func(ns string, ignored bool) error {
		if ignored {
			return nil
		}
		return c.pods.EachIn(ns, clusterSPIFFEID.PodSelector, func(pod *corev1.Pod) {
			uids = append(uids, pod.UID)
		})
	})
	return uids, err
}

// eachSelectedNamespace calls f with every namespace a ClusterSPIFFEID's namespace selector
// matches, and whether the config ignores it.
func (c *Controller) eachSelectedNamespace(clusterSPIFFEID *render.ClusterSPIFFEID, f func(ns string, ignored bool) error) error {
	namespaces, err := c.namespaceLister.List(clusterSPIFFEID.NamespaceSelector)
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range namespaces {
		if err := f(ns.Name, c.opts.IgnoreNamespace(ns.Name)); err != nil {
			return err
		}
	}
	return nil
}

// syncClusterSPIFFEIDStatus writes a ClusterSPIFFEID's stats when they changed. They count
// what spire-controller-manager 0.7.0 counts, so that dashboards and alerts keep their
// meaning: namespace and pod counts from the listers, per-pod outcomes from the reconciler's
// status counters. A spec that does not compile counts nothing, as there; its Ready condition
// says why.
func (c *Controller) syncClusterSPIFFEIDStatus(ctx context.Context, name string) error {
	status := c.clusterSPIFFEIDs.status
	start := time.Now()
	clusterSPIFFEID, err := c.clusterSPIFFEIDs.lister.Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !c.opts.Class.Matches(clusterSPIFFEID.Spec.ClassName)) {
		status.forget(name)
		return nil
	} else if err != nil {
		return fmt.Errorf("getting ClusterSPIFFEID %s: %w", name, err)
	}
	compiled := c.clusterSPIFFEIDs.compiled.Get(clusterSPIFFEID)
	var stats spirev1alpha1.ClusterSPIFFEIDStats
	var unscheduled int
	if compiled.Err == nil {
		if unscheduled, err = c.selectionStats(compiled, &stats); err != nil {
			return err
		}
		c.reconciler.StatusCounters().Stats(name, &stats)
	}
	status.observe(name, time.Since(start))
	recordEntryOutcomes(name, stats, unscheduled)
	return status.write(ctx, clusterSPIFFEID, stats, readyCondition(compiled, stats, unscheduled, clusterSPIFFEID.Generation))
}

// selectionStats counts, as spire-controller-manager does, the namespaces a ClusterSPIFFEID
// selects (ignored ones included), the ignored ones among them, and the pods it selects in the
// others, whatever their phase and whether or not a fallback is skipped for them. It returns
// how many of those pods are not scheduled yet.
func (c *Controller) selectionStats(compiled *render.ClusterSPIFFEID, stats *spirev1alpha1.ClusterSPIFFEIDStats) (int, error) {
	unscheduled := 0
	err := c.eachSelectedNamespace(compiled, func(ns string, ignored bool) error {
		stats.NamespacesSelected++
		if ignored {
			stats.NamespacesIgnored++
			return nil
		}
		return c.pods.EachIn(ns, compiled.PodSelector, func(pod *corev1.Pod) {
			stats.PodsSelected++
			if pod.Spec.NodeName == "" && render.PhaseDeclaresEntries(pod.Status.Phase) {
				unscheduled++
			}
		})
	})
	return unscheduled, err
}

// readyCondition summarises a ClusterSPIFFEID's stats in a Ready condition with a reason and
// a message a person can act on. Pods that only wait for a node count as render failures in
// the stats, as in spire-controller-manager, but do not make it not Ready.
func readyCondition(compiled *render.ClusterSPIFFEID, stats spirev1alpha1.ClusterSPIFFEIDStats, unscheduled int, generation int64) metav1.Condition {
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

// recordEntryOutcomes sets a ClusterSPIFFEID's entry counts by outcome from the stats its
// status shows; pods waiting for a node, which the stats count as render failures, apart.
func recordEntryOutcomes(name string, stats spirev1alpha1.ClusterSPIFFEIDStats, unscheduled int) {
	waiting := min(unscheduled, stats.PodEntryRenderFailures)
	for outcome, n := range map[string]int{
		"set":              stats.EntriesToSet - stats.EntryFailures,
		"masked":           stats.EntriesMasked,
		"entry_failure":    stats.EntryFailures,
		"render_failure":   stats.PodEntryRenderFailures - waiting,
		"waiting_for_node": waiting,
	} {
		metrics.ClusterSPIFFEIDEntries.WithLabelValues(name, outcome).Set(float64(n))
	}
}

const (
	// statusDelay batches status writes: a ClusterSPIFFEID that selects thousands of pods gets
	// one status update for a burst of pod syncs, not one per pod.
	statusDelay = time.Second

	// statusShare bounds the share of one core that ClusterSPIFFEID status syncs may take when
	// pod syncs change their counters. Each sync counts the pods its ClusterSPIFFEID selects
	// from the listers, tens of milliseconds at 30k pods, and during a bulk every
	// ClusterSPIFFEID's counters change all the time: at a fixed second, ten of them took half
	// the controller's CPU in the first two minutes of a 300k-entry bulk, on the cores SPIRE
	// needed to create entries.
	statusShare = 0.05
)

// clusterSPIFFEIDStatus queues, paces and writes the status of ClusterSPIFFEIDs. A counter
// change waits statusDelay, or longer when the counting of all ClusterSPIFFEIDs together
// would take more than statusShare of that wait; a change of the ClusterSPIFFEID itself is
// not paced.
type clusterSPIFFEIDStatus struct {
	// queue holds the names whose status may be out of date.
	queue  workqueue.TypedRateLimitingInterface[string]
	writer *runner.StatusWriter[*spirev1alpha1.ClusterSPIFFEID]

	mu sync.Mutex
	// cost is what counting each ClusterSPIFFEID's status took last.
	cost map[string]time.Duration
}

func newClusterSPIFFEIDStatus(writer *runner.StatusWriter[*spirev1alpha1.ClusterSPIFFEID]) *clusterSPIFFEIDStatus {
	return &clusterSPIFFEIDStatus{
		queue:  runner.NewQueue[string]("spire_registrar_clusterspiffeid_status", 50, 500),
		writer: writer,
		cost:   map[string]time.Duration{},
	}
}

// enqueueNow schedules the status of a ClusterSPIFFEID that changed itself.
func (s *clusterSPIFFEIDStatus) enqueueNow(obj any) {
	if clusterSPIFFEID, ok := runner.Unwrap[*spirev1alpha1.ClusterSPIFFEID](obj); ok {
		s.queue.AddAfter(clusterSPIFFEID.Name, statusDelay)
	}
}

// enqueuePaced schedules the status of ClusterSPIFFEIDs whose counters changed, paced by
// what counting them costs.
func (s *clusterSPIFFEIDStatus) enqueuePaced(names []string) {
	if len(names) == 0 {
		return
	}
	delay := s.delay()
	for _, name := range names {
		s.queue.AddAfter(name, delay)
	}
}

// observe records what counting a ClusterSPIFFEID's status took.
func (s *clusterSPIFFEIDStatus) observe(name string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cost[name] = took
}

// forget drops a ClusterSPIFFEID that is gone or not this controller's: its cost and its
// entry counts.
func (s *clusterSPIFFEIDStatus) forget(name string) {
	s.mu.Lock()
	delete(s.cost, name)
	s.mu.Unlock()
	metrics.ClusterSPIFFEIDEntries.DeletePartialMatch(map[string]string{"clusterspiffeid": name})
}

// delay is how long a counter change waits for its status sync.
func (s *clusterSPIFFEIDStatus) delay() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total time.Duration
	for _, took := range s.cost {
		total += took
	}
	return max(statusDelay, time.Duration(float64(total)/statusShare))
}

// write writes a ClusterSPIFFEID's stats and Ready condition when they changed.
func (s *clusterSPIFFEIDStatus) write(ctx context.Context, clusterSPIFFEID *spirev1alpha1.ClusterSPIFFEID, stats spirev1alpha1.ClusterSPIFFEIDStats, ready metav1.Condition) error {
	_, err := s.writer.Write(ctx, clusterSPIFFEID, func(updated *spirev1alpha1.ClusterSPIFFEID) { updated.Status.Stats = stats }, ready)
	return err
}
