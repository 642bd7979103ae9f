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

// Package runner holds what every spire-registrar controller runs the same way: Run, which
// starts the Events, waits for the informers, runs the first full resync against SPIRE with
// backoff, then runs the workers and the periodic resync until the context ends; the named
// rate-limited queues and the worker that syncs their keys with kube-controller-manager's
// retry policy; the Events helper; the full-resync metrics; and the small helpers of event
// handlers and status writers (Unwrap, Truncate).
package runner

import (
	"context"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// Loop is what Run needs of a controller.
type Loop struct {
	// Name names the controller in logs and metrics.
	Name string
	// Events are started before anything else and shut down after everything else.
	Events *Events
	// CachesSynced are the informers to wait for.
	CachesSynced []cache.InformerSynced
	// Prefetch, if set, is called before waiting for the informers, to start what the first
	// resync will need (its SPIRE listing), so that it overlaps their initial lists.
	Prefetch func(context.Context)
	// Resync is the full resync against SPIRE. It runs at start, retried with backoff until
	// it succeeds, then every ResyncInterval. Run records its metrics (see meteredResync).
	Resync         func(context.Context) error
	ResyncInterval time.Duration
	// MaxResyncShare bounds the share of time resyncs take (see every); 0 is the default.
	MaxResyncShare float64
	// WatchSPIRE, if set, runs from the start of Run to its end and calls reconnected each
	// time the connection to SPIRE is ready again after it was lost (spire.WatchReconnects
	// does). A SPIRE server restarted on another datastore, or on a backup of its own, holds
	// something else than the entry cache remembers, and nothing but a full list can tell:
	// each call has a full resync run as soon as MaxResyncShare allows, retried with backoff
	// until one succeeds (see every). A call before the first resync succeeded is followed by
	// one more.
	WatchSPIRE func(ctx context.Context, reconnected func())
	// OnSynced, if set, is called once the first resync succeeded, before the workers start:
	// from then on the controller is ready.
	OnSynced func()
	// Workers are the goroutines that drain the queues.
	Workers []Workers
	// Queues are shut down when the context ends, which ends the workers.
	Queues []ShutDowner
	// Handlers, if set, are the controller's event handlers, removed from their informers
	// when the context ends, before the queues are shut down.
	Handlers *Handlers
}

// Workers runs Count goroutines of Work, each restarted a second after it returns until the
// context ends. Work is typically a Work call on one queue.
type Workers struct {
	Count int
	Work  func(context.Context)
}

// ShutDowner is a queue Run shuts down.
type ShutDowner interface {
	ShutDown()
}

// Run runs a controller until ctx ends, and returns once every goroutine it started has
// ended: it starts the Events and the watch of SPIRE, waits for the informers, runs the first
// full resync (retrying until SPIRE answers; nothing is written before), then the workers and
// the resyncs that follow, periodic or after a reconnection to SPIRE. When it returns, the
// controller's event handlers are gone from the informers.
func Run(ctx context.Context, l Loop) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)

	l.Events.Start()
	defer l.Events.Shutdown()

	var wg sync.WaitGroup
	defer func() {
		if l.Handlers != nil {
			l.Handlers.RemoveAll()
		}
		for _, q := range l.Queues {
			q.ShutDown()
		}
		wg.Wait()
		logger.Info("Stopped controller", "controller", l.Name)
	}()

	// Buffered: reconnections while a resync runs, or before the first succeeded, are
	// remembered as one, and the watcher never waits for the resync loop.
	reconnected := make(chan struct{}, 1)
	if l.WatchSPIRE != nil {
		// Before the first resync: a reconnection during it must not go unseen.
		wg.Go(func() {
			l.WatchSPIRE(ctx, func() {
				select {
				case reconnected <- struct{}{}:
				default:
				}
			})
		})
	}

	synced := metrics.ControllerSynced.WithLabelValues(l.Name)
	synced.Set(0)
	defer synced.Set(0)
	logger.Info("Starting controller", "controller", l.Name)
	if l.Prefetch != nil {
		l.Prefetch(ctx)
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, l.CachesSynced...) {
		return
	}
	resync := meteredResync(l.Name, l.Resync)
	if !UntilSucceeded(ctx, func(ctx context.Context) error { return resync(ctx, ResyncAtStart) }) {
		return
	}
	if l.OnSynced != nil {
		l.OnSynced()
	}
	synced.Set(1)

	for _, w := range l.Workers {
		for range w.Count {
			wg.Go(func() { wait.UntilWithContext(ctx, w.Work, time.Second) })
		}
	}
	wg.Go(func() { every(ctx, l.ResyncInterval, l.MaxResyncShare, resync, reconnected) })

	<-ctx.Done()
}
