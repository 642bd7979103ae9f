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

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// resyncMetrics are the full-resync metrics of one controller.
type resyncMetrics struct {
	Successes, Failures float64
	LastTimeSet         bool
	LastDuration        float64
}

func readResyncMetrics(controller string) resyncMetrics {
	return resyncMetrics{
		Successes:    value(metrics.FullResyncs.WithLabelValues(controller, "success")),
		Failures:     value(metrics.FullResyncs.WithLabelValues(controller, "failure")),
		LastTimeSet:  value(metrics.LastFullResyncTime.WithLabelValues(controller)) > 0,
		LastDuration: value(metrics.LastFullResyncDuration.WithLabelValues(controller)),
	}
}

// value reads a counter or a gauge.
func value(m prometheus.Metric) float64 {
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		panic(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}

// TestMeteredResyncMetrics checks the metrics of full resyncs as the endpointslice
// controller's TestReconcileEndpointSlicesMetrics checks its own: every run is counted by
// result, and only a successful one moves the last-resync gauges.
func TestMeteredResyncMetrics(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const controller = "test-metered-resync"
	fail := true
	resync := meteredResync(controller, func(context.Context) error {
		if fail {
			return errors.New("SPIRE is down")
		}
		return nil
	})

	if err := resync(ctx, ResyncAtStart); err == nil {
		t.Fatal("a failed resync returned no error")
	}
	if diff := cmp.Diff(resyncMetrics{Failures: 1}, readResyncMetrics(controller)); diff != "" {
		t.Errorf("after a failed resync (-want +got):\n%s", diff)
	}

	fail = false
	for _, reason := range []string{ResyncAtStart, ResyncOnReconnect} {
		if err := resync(ctx, reason); err != nil {
			t.Fatal(err)
		}
	}
	got := readResyncMetrics(controller)
	if got.LastDuration < 0 {
		t.Errorf("last resync duration %v is negative", got.LastDuration)
	}
	got.LastDuration = 0
	if diff := cmp.Diff(resyncMetrics{Successes: 2, Failures: 1, LastTimeSet: true}, got); diff != "" {
		t.Errorf("after two successful resyncs (-want +got):\n%s", diff)
	}
	starts := map[string]float64{}
	for _, reason := range []string{ResyncAtStart, ResyncOnInterval, ResyncOnReconnect} {
		starts[reason] = value(metrics.FullResyncStarts.WithLabelValues(controller, reason))
	}
	if diff := cmp.Diff(map[string]float64{ResyncAtStart: 2, ResyncOnInterval: 0, ResyncOnReconnect: 1}, starts); diff != "" {
		t.Errorf("full_resync_starts_total by reason (-want +got):\n%s", diff)
	}
}

func TestRestAfterBoundsTheShareOfResyncs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		share    float64
		last     time.Duration
		want     time.Duration
	}{
		{"a quick resync keeps the interval", 10 * time.Second, 0.1, 200 * time.Millisecond, 10 * time.Second},
		{"a long resync stretches the wait to 9 times its duration", 10 * time.Second, 0.1, 5 * time.Second, 45 * time.Second},
		{"0 is the default share", 10 * time.Second, 0, 5 * time.Second, 45 * time.Second},
		{"a share of a half rests as long as the resync took", time.Second, 0.5, 3 * time.Second, 3 * time.Second},
		{"a share of 1 never stretches", 100 * time.Millisecond, 1, time.Minute, 100 * time.Millisecond},
		{"before the first periodic resync", 10 * time.Second, 0.1, 0, 10 * time.Second},
	} {
		if got := restAfter(tc.interval, tc.share, tc.last); got != tc.want {
			t.Errorf("%s: restAfter(%v, %v, %v) = %v, want %v", tc.name, tc.interval, tc.share, tc.last, got, tc.want)
		}
	}
}
