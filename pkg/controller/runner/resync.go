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
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// Why a full resync runs, as full_resync_starts_total's reason label says.
const (
	// ResyncAtStart is the first resync, retried until it succeeds.
	ResyncAtStart = "start"
	// ResyncOnInterval is the periodic resync, every ResyncInterval.
	ResyncOnInterval = "interval"
	// ResyncOnReconnect follows a reconnection to SPIRE (see Loop.WatchSPIRE).
	ResyncOnReconnect = "reconnect"
)

// meteredResync wraps a full resync so that every run is counted by reason in
// full_resync_starts_total and by result in full_resyncs_total, and every successful one sets
// last_full_resync_timestamp_seconds and last_full_resync_duration_seconds, all labelled with
// the controller's name. Run wraps the resync it is given, so that every controller records
// the same metrics.
func meteredResync(controller string, resync func(context.Context) error) func(context.Context, string) error {
	return func(ctx context.Context, reason string) error {
		metrics.FullResyncStarts.WithLabelValues(controller, reason).Inc()
		start := time.Now()
		err := resync(ctx)
		result := "success"
		if err != nil {
			result = "failure"
		} else {
			metrics.LastFullResyncTime.WithLabelValues(controller).SetToCurrentTime()
			metrics.LastFullResyncDuration.WithLabelValues(controller).Set(time.Since(start).Seconds())
		}
		metrics.FullResyncs.WithLabelValues(controller, result).Inc()
		return err
	}
}

// resyncBackoff is how a resync that must succeed is retried: 100ms doubling to 30s.
func resyncBackoff() wait.Backoff {
	return wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}
}

// UntilSucceeded runs resync, retrying with backoff (100ms doubling to 30s) until it succeeds,
// and reports whether it did before ctx ended.
func UntilSucceeded(ctx context.Context, resync func(context.Context) error) bool {
	logger := klog.FromContext(ctx)
	err := wait.ExponentialBackoffWithContext(ctx, resyncBackoff(), func(ctx context.Context) (bool, error) {
		if err := resync(ctx); err != nil {
			logger.Error(err, "Initial resync failed; retrying")
			return false, nil
		}
		return true, nil
	})
	return err == nil
}

// DefaultMaxResyncShare is the largest share of time full resyncs take by default. With
// spire-controller-manager's shipped gcInterval of 10s, a resync of 300k entries would
// otherwise list SPIRE back to back.
const DefaultMaxResyncShare = 0.1

// every runs resync every interval (jittered, so replicas of many clusters sharing one SPIRE
// server spread their lists), the first time one interval from now, until ctx ends. A failed
// resync is retried at the next interval; meanwhile events are handled from the caches.
//
// The wait after a resync is stretched so that resyncs take at most maxShare of the time
// (0 means DefaultMaxResyncShare, 1 or more never stretches): a resync that took d is followed
// by at least d×(1/maxShare−1) of rest. Out-of-band changes are then repaired a little later
// on a large server, instead of SPIRE serving full lists without pause.
//
// Each value received from reconnected (see Loop.WatchSPIRE) has a resync run as soon as that
// rest allows, at once on all but large servers, and retried with backoff until one
// succeeds: SPIRE may have come back holding something else than what the entry cache
// remembers, and until a resync lists it, nothing repairs that but the next interval. A value
// that arrives while a resync runs has another run after it, since that one may have listed
// SPIRE before the reconnection. The interval counts from the last resync, whatever started
// it.
func every(ctx context.Context, interval time.Duration, maxShare float64, resync func(context.Context, string) error, reconnected <-chan struct{}) {
	logger := klog.FromContext(ctx)
	var last time.Duration // how long the last resync took
	lastEnd := time.Now()  // when it ended: the first resync has just succeeded
	next := lastEnd.Add(wait.Jitter(interval, 0.1))
	// pending is set while a reconnection waits for a resync that succeeds, due at retryAt.
	pending := false
	var retryAt time.Time
	backoff := resyncBackoff()
	for {
		due, reason := next, ResyncOnInterval
		if pending && !retryAt.After(next) {
			due, reason = retryAt, ResyncOnReconnect
		}
		timer := time.NewTimer(time.Until(due))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-reconnected:
			timer.Stop()
			if !pending {
				logger.Info("Resyncing in full: SPIRE may hold something else than it did before the connection was lost")
			}
			pending, backoff = true, resyncBackoff()
			retryAt = lastEnd.Add(restAfter(0, maxShare, last))
			continue
		case <-timer.C:
		}
		start := time.Now()
		err := resync(ctx, reason)
		lastEnd = time.Now()
		last = lastEnd.Sub(start)
		pause := restAfter(interval, maxShare, last)
		if pause > interval {
			logger.V(2).Info("Full resync interval stretched to bound the share of time resyncs take", "interval", interval, "lastResync", last, "wait", pause)
		}
		next = lastEnd.Add(wait.Jitter(pause, 0.1))
		if err == nil {
			pending = false
			continue
		}
		if !pending {
			logger.Error(err, "Full resync failed")
			continue
		}
		retryAt = lastEnd.Add(max(backoff.Step(), restAfter(0, maxShare, last)))
		logger.Error(err, "Full resync after a reconnection to SPIRE failed; retrying", "retryIn", time.Until(retryAt).Round(time.Millisecond))
	}
}

// restAfter is the wait before the next full resync: interval, stretched so that a resync
// that took last is at most maxShare of the time.
func restAfter(interval time.Duration, maxShare float64, last time.Duration) time.Duration {
	if maxShare <= 0 {
		maxShare = DefaultMaxResyncShare
	}
	if maxShare >= 1 {
		return interval
	}
	return max(interval, time.Duration(float64(last)*(1/maxShare-1)))
}
