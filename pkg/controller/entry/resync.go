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

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// initialResync runs the first full resync, retrying with backoff until it succeeds or ctx
// ends. It fails only when SPIRE cannot be listed (nothing is written then); writes SPIRE
// refuses are retried key by key and do not hold up readiness.
func (c *Controller) initialResync(ctx context.Context) bool {
	if !runner.UntilSucceeded(ctx, c.fullResync) {
		return false
	}
	c.synced.Store(true)
	return true
}

// fullResync diffs every declared entry against a fresh list of every entry SPIRE holds. It
// excludes pod syncs while it runs, since it replaces the cache they read.
func (c *Controller) fullResync(ctx context.Context) error {
	start := time.Now()
	err := c.fullResyncLocked(ctx)
	result := "success"
	if err != nil {
		result = "failure"
	} else {
		metrics.LastFullResyncTime.WithLabelValues(ControllerName).SetToCurrentTime()
		metrics.LastFullResyncDuration.WithLabelValues(ControllerName).Set(time.Since(start).Seconds())
	}
	metrics.FullResyncs.WithLabelValues(ControllerName, result).Inc()
	return err
}

func (c *Controller) fullResyncLocked(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	c.resyncLock.Lock()
	defer c.resyncLock.Unlock()
	start := time.Now()

	all, err := c.spire.ListEntries(ctx)
	if err != nil {
		// Never act on a partial picture: a failed list must not turn into deletes.
		return fmt.Errorf("listing SPIRE entries: %w", err)
	}
	owned := make([]*spiretypes.Entry, 0, len(all))
	var leftovers []*spiretypes.Entry
	for _, e := range all {
		switch {
		case c.ownership.owns(e):
			owned = append(owned, e)
		case c.ownership.deleteOnly(e):
			leftovers = append(leftovers, e)
		}
	}
	c.entries.replace(owned)

	declared, outcomes, err := c.declaredPods(ctx)
	if err != nil {
		return err
	}

	statics, _, err := c.declaredStatics()
	if err != nil {
		return err
	}
	declared = append(declared, statics...)
	c.staticKeys.reset(statics)

	p := reconcile(declared, owned, c.fieldSupport.get())
	p.toDelete = append(p.toDelete, leftovers...)
	failures, writeErr := c.finalize(ctx, p)
	recordPlanOutcomes(outcomes, p, failures)
	for _, name := range c.outcomes.replaceAll(outcomes) {
		c.statusQueue.AddAfter(name, statusDelay)
	}
	// Static entries are few: resync each, which also brings its status up to date.
	c.enqueueAllStatics()

	logger.V(2).Info("Full resync done", "duration", time.Since(start), "entries", len(all), "owned", len(owned),
		"declared", len(declared), "created", len(p.toCreate), "updated", len(p.toUpdate), "deleted", len(p.toDelete),
		"masked", len(p.masked))
	if writeErr != nil {
		// A write SPIRE refuses (a federatesWith naming a trust domain it has no bundle for,
		// say) must not hold up everything else: the resync still counts, since the picture
		// it acted on was complete, and the failed keys are retried with backoff on their own.
		c.retryFailedWrites(p, failures)
		logger.Error(writeErr, "Some writes of the full resync failed; their pods and static entries are retried")
	}
	return nil
}

// declaredPods renders the entries every pod declares, and what became of each pod's
// identities. It declares nothing when ClusterSPIFFEIDs are ignored.
func (c *Controller) declaredPods(ctx context.Context) ([]*render.DeclaredEntry, map[types.UID]podOutcomes, error) {
	outcomes := map[types.UID]podOutcomes{}
	if c.opts.IgnoreClusterSPIFFEIDs {
		return nil, outcomes, nil
	}
	identities, err := c.activeClusterSPIFFEIDs()
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	var declared []*render.DeclaredEntry
	for _, pod := range pods {
		ds, outs := c.declarePod(ctx, pod, identities)
		declared = append(declared, ds...)
		if len(outs) > 0 {
			outcomes[pod.UID] = outs
		}
	}
	return declared, outcomes, nil
}

// retryFailedWrites queues, with backoff, the pods and static entries whose writes failed.
func (c *Controller) retryFailedWrites(p plan, failures map[render.Key]error) {
	retry := func(d *render.DeclaredEntry) {
		if failures[d.Key] == nil {
			return
		}
		if d.Declarer.PodUID != "" {
			c.podQueue.AddRateLimited(d.Declarer.PodUID)
		} else {
			c.staticQueue.AddRateLimited(d.Declarer.Name)
		}
	}
	for _, d := range p.toCreate {
		retry(d)
	}
	for _, u := range p.toUpdate {
		retry(u.desired)
	}
	// A pod entry whose delete failed is still cached; the pod's sync deletes it again.
	// Other leftovers wait for the next resync, the only path that deletes them.
	for _, e := range p.toDelete {
		if uid := render.PodUIDOf(e); uid != "" && len(c.entries.forPod(uid)) > 0 {
			c.podQueue.AddRateLimited(uid)
		}
	}
}

func (c *Controller) enqueueAllStatics() {
	all, err := c.staticLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, cse := range all {
		c.staticQueue.Add(cse.Name)
	}
}
