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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

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

// forgetEntryOutcomes drops the entry counts of a ClusterSPIFFEID that is gone or not this
// controller's.
func forgetEntryOutcomes(name string) {
	metrics.ClusterSPIFFEIDEntries.DeletePartialMatch(map[string]string{"clusterspiffeid": name})
}
