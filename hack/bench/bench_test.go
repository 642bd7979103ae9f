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

package main

import (
	"context"
	"testing"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// TestSmoke runs the bench's convergence scenario at N=500 and checks correctness only —
// every pod has exactly one entry, with the declared SPIFFE ID, and there are no duplicate
// or stray entries — so that the bench's setup cannot rot between benchmark runs. It asserts
// no timings: CI machines are too noisy for that.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real kube-apiserver and spire-server; skipped with -short")
	}
	const n = 500
	ctx := t.Context()
	cl, err := startCluster(ctx, t.Logf, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.stop)
	r, err := cl.startRun(ctx, "smoke", n, 10, spire.BatchingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.stop(context.Background()) })

	first, _, err := r.createPods(ctx, "pod", n, 32)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.waitForCount(ctx, n, first, 45*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.verify(ctx); err != nil {
		t.Fatal(err)
	}
	// One more event on top of the converged state, through the steady-state path.
	if _, err := r.podLatency(ctx, "steady", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.verify(ctx); err != nil {
		t.Fatal(err)
	}
	if st := r.batching.Stats(); st.Calls < n || st.Items < n {
		t.Errorf("batching client saw %d calls with %d items, want at least %d", st.Calls, st.Items, n)
	}
}

// TestRolloutSmoke runs the rollout mode at N=20 on both datastores and checks what the
// measurement rests on: the rollout converges to exactly the new pods' entries (checked
// again by verify inside benchRollout), every old pod was replaced, every new pod has a
// latency, and SPIRE's telemetry saw at least one create and one delete per replaced pod.
// It asserts no timings.
func TestRolloutSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real control plane, kwok, PostgreSQL and spire-server; skipped with -short")
	}
	const n = 20
	ctx := t.Context()
	w, err := startRolloutWorld(ctx, t.Logf, n, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stop)
	o := options{workers: 10, timeout: 45 * time.Second, poll: 5 * time.Millisecond, flapsPerSecond: 20}
	for _, ds := range []string{datastoreSQLite, datastorePostgres} {
		t.Run(ds, func(t *testing.T) {
			res, err := w.rollout(ctx, ds, n, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.replaced != n {
				t.Errorf("%d old pods replaced, want %d", res.replaced, n)
			}
			if len(res.latencies) != n || res.unmeasured != 0 {
				t.Errorf("latencies of %d new pods (%d unmeasured), want %d", len(res.latencies), res.unmeasured, n)
			}
			if res.writes.creates < n || res.writes.deletes < n {
				t.Errorf("SPIRE counted %v entry creates and %v deletes, want at least %d of each", res.writes.creates, res.writes.deletes, n)
			}
			if len(res.rounds) == 0 {
				t.Error("no round of SPIRE queries timed")
			}
			if ds == datastorePostgres && res.postgresCPU < 0 {
				t.Error("PostgreSQL's CPU not found in /proc")
			}
			t.Logf("converged in %v; SPIRE entry writes: %v creates, %v updates, %v deletes; %d Ready flaps; %d query rounds; PostgreSQL CPU %.2fs",
				res.converged, res.writes.creates, res.writes.updates, res.writes.deletes, res.flaps, len(res.rounds), res.postgresCPU)
		})
	}
}
