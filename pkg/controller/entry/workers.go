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

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

func (c *Controller) podWorker(ctx context.Context) {
	for processNext(ctx, c.podQueue, "pod", c.syncPod) {
	}
}

func (c *Controller) identityWorker(ctx context.Context) {
	for processNext(ctx, c.identityQueue, "clusterSPIFFEID", c.syncIdentity) {
	}
}

func (c *Controller) statusWorker(ctx context.Context) {
	for processNext(ctx, c.statusQueue, "clusterSPIFFEID", c.syncStatus) {
	}
}

func (c *Controller) staticWorker(ctx context.Context) {
	for processNext(ctx, c.staticQueue, "clusterStaticEntry", c.syncStatic) {
	}
}

// processNext takes one key off the queue and syncs it. It returns false when the queue is
// shut down.
func processNext[T comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[T], kind string, sync func(context.Context, T) error) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)

	logger := klog.FromContext(ctx).WithValues(kind, key)
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	err := sync(ctx, key)
	elapsed := time.Since(start)
	metrics.SyncDuration.WithLabelValues(ControllerName, kind).Observe(elapsed.Seconds())
	logger.V(4).Info("Finished syncing", "duration", elapsed, "err", err)
	handleErr(ctx, queue, key, err)
	return true
}

// handleErr forgets a key that synced, retries a failed one with backoff, and drops it after
// maxRetries: the next full resync will pick it up again, so a dropped key is delayed, not lost.
func handleErr[T comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[T], key T, err error) {
	if err == nil {
		queue.Forget(key)
		return
	}
	logger := klog.FromContext(ctx)
	if queue.NumRequeues(key) < maxRetries {
		logger.V(2).Info("Sync failed, retrying", "err", err)
		queue.AddRateLimited(key)
		return
	}
	queue.Forget(key)
	utilruntime.HandleErrorWithContext(ctx, err, "Dropping key out of the queue after retries; the next resync will retry it", "retries", maxRetries)
}
