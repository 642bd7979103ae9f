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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
)

// fullResync diffs every declared entry against a fresh list of every entry SPIRE holds. It
// fails only when SPIRE cannot be listed (nothing is written then); writes SPIRE refuses are
// retried key by key and do not hold up readiness.
func (c *Controller) fullResync(ctx context.Context) error {
	res, err := c.reconciler.Resync(ctx, c.declareAll)
	if err != nil {
		return err
	}
	if p := c.podSide; p != nil {
		p.clusterSPIFFEIDs.status.enqueuePaced(res.StatusChanged)
		// A write SPIRE refused (see below) is retried pod by pod.
		for _, uid := range res.RetryPods {
			p.podQueue.AddRateLimited(uid)
		}
	}
	// Static entries are few: resync each, which also brings its status up to date.
	c.enqueueAllClusterStaticEntries()
	if res.WriteErr != nil {
		// A write SPIRE refuses (a federatesWith naming a trust domain it has no bundle for,
		// say) must not hold up everything else: the resync still counts, since the picture
		// it acted on was complete, and the failed keys (pods above) are retried with backoff
		// on their own.
		for _, name := range res.RetryNames {
			c.clusterStaticEntries.queue.AddRateLimited(name)
		}
		klog.FromContext(ctx).Error(res.WriteErr, "Some writes of the full resync failed; their pods and static entries are retried")
	}
	return nil
}

// declareAll renders what every pod and every ClusterStaticEntry declares. The reconciler
// calls it once SPIRE is listed, while syncs go on.
func (c *Controller) declareAll(ctx context.Context) (reconciler.Declared, error) {
	declared, renderFailures, err := c.declaredPods(ctx)
	if err != nil {
		return reconciler.Declared{}, err
	}
	statics, _, err := c.declaredClusterStaticEntries()
	if err != nil {
		return reconciler.Declared{}, err
	}
	declared.Entries = append(declared.Entries, statics...)
	declared.RenderFailures = renderFailures
	return declared, nil
}

// declaredPods renders the entries every pod declares, and names, per pod, the
// ClusterSPIFFEIDs that rendered none. It declares nothing when ClusterSPIFFEIDs are ignored.
func (c *Controller) declaredPods(ctx context.Context) (reconciler.Declared, map[types.UID][]string, error) {
	var declared reconciler.Declared
	renderFailures := map[types.UID][]string{}
	if c.podSide == nil {
		return declared, renderFailures, nil
	}
	clusterSPIFFEIDs, err := c.activeClusterSPIFFEIDs()
	if err != nil {
		return declared, nil, err
	}
	// A pod that must be read whole and cannot be fails the resync, which then writes nothing
	// and is retried: its entries must not turn into deletes.
	var readErr error
	c.pods.Each(func(cached *corev1.Pod) {
		if readErr != nil {
			return
		}
		pod, found, err := c.podToRender(ctx, cached, clusterSPIFFEIDs)
		if err != nil {
			readErr = err
			return
		}
		if !found {
			return // Gone: the informer's delete event follows.
		}
		entries, failed := c.declarePod(ctx, pod, clusterSPIFFEIDs)
		declared.Entries = append(declared.Entries, entries...)
		if len(failed) > 0 {
			renderFailures[pod.UID] = failed
		}
	})
	if readErr != nil {
		return declared, nil, readErr
	}
	return declared, renderFailures, nil
}
