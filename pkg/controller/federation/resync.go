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

package federation

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// fullResync hands every resource in view to the reconciler's full resync, which lists SPIRE
// and diffs everything. The initial one is the first time the controller writes: a failed
// list writes nothing, and in particular deletes nothing. It fails only when SPIRE cannot be
// listed; relationships SPIRE refuses are retried key by key and do not hold up readiness.
// runner.Run retries the first one until it succeeds, runs the others every ResyncInterval
// and records all in the full-resync metrics, labelled with ControllerName as the entry
// controller's are with its own, so that one dashboard and one alert cover both.
func (c *Controller) fullResync(ctx context.Context) error {
	cftds, err := c.cftdLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing ClusterFederatedTrustDomains: %w", err)
	}
	res, err := c.reconciler.Resync(ctx, cftds)
	if err != nil {
		return err
	}
	c.report(ctx, res.Result)
	if res.WriteErr != nil {
		// A relationship SPIRE refuses must not hold up the others or readiness: the picture
		// was complete, so the resync counts, and every trust domain of the plan is synced
		// again on its own, with backoff (those that went through find nothing to do).
		for _, td := range res.TrustDomains {
			c.queue.AddRateLimited(td)
		}
		klog.FromContext(ctx).Error(res.WriteErr, "Some writes of the full resync failed; their trust domains are retried")
	}
	return nil
}
