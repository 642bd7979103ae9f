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
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

// processNext takes one trust domain off the queue and syncs it. It returns false when the
// queue is shut down.
func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)

	logger := klog.FromContext(ctx).WithValues("trustDomain", key)
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	err := c.syncTrustDomain(ctx, key)
	logger.V(4).Info("Finished syncing", "duration", time.Since(start), "err", err)
	c.handleErr(ctx, key, err)
	return true
}

// handleErr forgets a key that synced, retries a failed one with backoff, and drops it after
// maxRetries: the next full resync will pick it up again, so a dropped key is delayed, not lost.
func (c *Controller) handleErr(ctx context.Context, key string, err error) {
	if err == nil {
		c.queue.Forget(key)
		return
	}
	logger := klog.FromContext(ctx)
	if c.queue.NumRequeues(key) < maxRetries {
		logger.V(2).Info("Sync failed, retrying", "err", err)
		c.queue.AddRateLimited(key)
		return
	}
	c.queue.Forget(key)
	utilruntime.HandleErrorWithContext(ctx, err, "Dropping trust domain out of the queue after retries; the next resync will retry it", "retries", maxRetries)
}
