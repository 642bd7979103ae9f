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
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
)

// instantQueue retries at once, so that a test walks through every retry without waiting.
func instantQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
}

// TestKeyIsDroppedAfterMaxRetries: a key that never syncs is retried maxRetries times, then
// dropped (forgotten, not requeued) and left to the next full resync.
func TestKeyIsDroppedAfterMaxRetries(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	queue := instantQueue()
	defer queue.ShutDown()
	syncs := 0
	failing := func(context.Context, string) error {
		syncs++
		return errors.New("SPIRE is down")
	}

	queue.Add("pod-a")
	for queue.Len() > 0 {
		if syncs > 2*maxRetries {
			t.Fatalf("still retrying after %d syncs", syncs)
		}
		processNext(ctx, "test-controller", "pod", queue, nil, failing)
	}
	if want := maxRetries + 1; syncs != want {
		t.Errorf("synced %d times, want %d: the first attempt and %d retries", syncs, want, maxRetries)
	}
	if n := queue.NumRequeues("pod-a"); n != 0 {
		t.Errorf("dropped key still has %d requeues recorded, want it forgotten", n)
	}
}

// TestKeyIsForgottenAfterSuccess: a key that syncs after failures starts its backoff afresh.
func TestKeyIsForgottenAfterSuccess(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	queue := instantQueue()
	defer queue.ShutDown()
	syncs := 0
	flaky := func(context.Context, string) error {
		syncs++
		if syncs < 3 {
			return errors.New("not yet")
		}
		return nil
	}
	queue.Add("pod-a")
	for queue.Len() > 0 {
		processNext(ctx, "test-controller", "pod", queue, nil, flaky)
	}
	if syncs != 3 {
		t.Errorf("synced %d times, want 3", syncs)
	}
	if n := queue.NumRequeues("pod-a"); n != 0 {
		t.Errorf("synced key has %d requeues recorded, want 0", n)
	}
}

// TestWorkReturnsWhenTheQueueShutsDown: Run relies on it to stop its workers.
func TestWorkReturnsWhenTheQueueShutsDown(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	queue := instantQueue()
	done := make(chan struct{})
	go func() {
		Work(ctx, "test-controller", "pod", queue, nil, func(context.Context, string) error { return nil })
		close(done)
	}()
	queue.ShutDown()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Work did not return after the queue shut down")
	}
}
