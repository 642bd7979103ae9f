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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// TestRun walks a controller's life through Run: the first resync is retried until it
// succeeds, only then is the controller ready and are keys synced, the resync is metered, and
// Run returns once ctx ends, with its queue shut down.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const controller = "test-run"

	var resyncs atomic.Int32
	var ready atomic.Bool
	var mu sync.Mutex
	var synced []string
	queue := instantQueue()
	queue.Add("a")
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Loop{
			Name:         controller,
			Events:       NewEvents(ctx, controller, nil, false),
			CachesSynced: []cache.InformerSynced{func() bool { return true }},
			Resync: func(context.Context) error {
				if resyncs.Add(1) < 3 {
					if got := controllerSynced(t, controller); got != 0 {
						t.Errorf("controller_synced = %v before the first resync succeeded, want 0", got)
					}
					return errors.New("SPIRE is not up yet")
				}
				return nil
			},
			ResyncInterval: time.Hour,
			OnSynced:       func() { ready.Store(true) },
			Workers: []Workers{{Count: 2, Work: func(ctx context.Context) {
				Work(ctx, controller, "key", queue, nil, func(_ context.Context, key string) error {
					if !ready.Load() {
						t.Errorf("synced %q before the first resync succeeded", key)
					}
					mu.Lock()
					defer mu.Unlock()
					synced = append(synced, key)
					return nil
				})
			}}},
			Queues: []ShutDowner{queue},
		})
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(synced)
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued key was never synced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if diff := cmp.Diff(resyncMetrics{Successes: 1, Failures: 2, LastTimeSet: true}, withoutDuration(readResyncMetrics(controller))); diff != "" {
		t.Errorf("resync metrics (-want +got):\n%s", diff)
	}
	if got := controllerSynced(t, controller); got != 1 {
		t.Errorf("controller_synced = %v once synced, want 1", got)
	}

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	if !queue.ShuttingDown() {
		t.Errorf("Run returned without shutting its queue down")
	}
	if got := controllerSynced(t, controller); got != 0 {
		t.Errorf("controller_synced = %v after Run returned, want 0", got)
	}
}

// controllerSynced reads the controller_synced gauge of a controller.
func controllerSynced(t *testing.T, controller string) float64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.ControllerSynced.WithLabelValues(controller).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func withoutDuration(m resyncMetrics) resyncMetrics {
	m.LastDuration = 0
	return m
}
