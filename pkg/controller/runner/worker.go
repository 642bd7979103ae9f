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

package runner

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// maxRetries is how often a key is retried before it is dropped and left to the next full
// resync. With NewQueue's backoff that is about five minutes of retrying.
const maxRetries = 15

// NewQueue makes a named (hence metered) rate-limited queue. Retries back off exponentially
// from 10ms, so a brief SPIRE hiccup or a stale cache costs little, to 5 minutes, so a long
// outage is not hammered; the token bucket (qps, burst) caps the retry rate of all keys
// together, so a failure that hits every key at once does not turn into a retry storm.
func NewQueue[T comparable](name string, qps float64, burst int) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter[T](qps, burst), workqueue.TypedRateLimitingQueueConfig[T]{Name: name})
}

// rateLimiter is the retry backoff of NewQueue's keys.
func rateLimiter[T comparable](qps float64, burst int) workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](10*time.Millisecond, 5*time.Minute),
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(qps), burst)},
	)
}

// Work syncs keys from queue until it is shut down. controller and kind label the sync
// duration metric and the log lines. A key whose sync failed only because SPIRE could not be
// reached waits in parking, when not nil, instead of the queue's backoff.
func Work[T comparable](ctx context.Context, controller, kind string, queue workqueue.TypedRateLimitingInterface[T], parking *Parking[T], sync func(context.Context, T) error) {
	for processNext(ctx, controller, kind, queue, parking, sync) {
	}
}

// processNext takes one key off the queue and syncs it. It returns false when the queue is
// shut down.
func processNext[T comparable](ctx context.Context, controller, kind string, queue workqueue.TypedRateLimitingInterface[T], parking *Parking[T], sync func(context.Context, T) error) bool {
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
	metrics.SyncDuration.WithLabelValues(controller, kind).Observe(elapsed.Seconds())
	logger.V(4).Info("Finished syncing", "duration", elapsed, "err", err)
	handleErr(ctx, queue, parking, key, err)
	return true
}

// handleErr forgets a key that synced, parks one that failed only because SPIRE could not be
// reached or that waits for the parking's probe (ErrWaitForProbe), retries any other failure with backoff, and drops it after maxRetries: the next
// full resync will pick it up again, so a dropped key is delayed, not lost.
func handleErr[T comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[T], parking *Parking[T], key T, err error) {
	if err == nil {
		queue.Forget(key)
		return
	}
	if parking != nil && ctx.Err() == nil && (spire.Unreachable(err) || errors.Is(err, ErrWaitForProbe)) {
		klog.FromContext(ctx).V(2).Info("Sync failed: SPIRE is unreachable; retrying once it answers", "err", err)
		parking.park(key)
		return
	}
	if queue.NumRequeues(key) < maxRetries {
		klog.FromContext(ctx).V(2).Info("Sync failed, retrying", "err", err)
		queue.AddRateLimited(key)
		return
	}
	queue.Forget(key)
	utilruntime.HandleErrorWithContext(ctx, err, "Dropping key out of the queue after retries; the next resync will retry it", "retries", maxRetries)
}
