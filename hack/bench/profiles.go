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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// profiler fetches pprof profiles from a spire-registrar started with --profiling into a
// cell's log directory, so the phase that misses a target can be read with `go tool pprof`.
type profiler struct {
	// base is the metrics server's URL without its path, e.g. http://127.0.0.1:1234.
	base string
	dir  string
}

func newProfiler(metricsURL, dir string) profiler {
	return profiler{base: strings.TrimSuffix(metricsURL, "/metrics"), dir: dir}
}

// heap writes a heap profile taken after a garbage collection to <dir>/heap-<phase>.pb.gz.
func (p profiler) heap(ctx context.Context, phase string) error {
	return p.save(ctx, p.base+"/debug/pprof/heap?gc=1", "heap-"+phase+".pb.gz")
}

// cpu starts a CPU profile of the next d in the background and returns a function that waits
// for it to be written to <dir>/cpu-<phase>.pb.gz. A profile that fails is logged, never
// fatal: it is evidence, not a measurement.
func (p profiler) cpu(ctx context.Context, phase string, d time.Duration) (wait func()) {
	seconds := max(1, int(d.Round(time.Second)/time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds)
		if err := p.save(ctx, p.base+path, "cpu-"+phase+".pb.gz"); err != nil {
			logf("CPU profile of %s: %v", phase, err)
		}
	}()
	return func() { <-done }
}

// save writes what url serves to <dir>/file.
func (p profiler) save(ctx context.Context, url, file string) error {
	body, err := scrape(ctx, url)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.dir, file), body, 0o644)
}

// metrics saves a scrape of url, the controller's or SPIRE's metrics, to
// <dir>/metrics-<phase>.txt, so that their own view of a phase (sync, SPIRE write and RPC
// durations) can be read against the bench's.
func (p profiler) metrics(ctx context.Context, url, phase string) {
	if err := p.save(ctx, url, "metrics-"+phase+".txt"); err != nil {
		logf("metrics at %s: %v", phase, err)
	}
}

// profileDuration bounds a CPU profile to what pprof serves comfortably and the phase can
// fill.
func profileDuration(expected time.Duration) time.Duration {
	return min(max(expected, 5*time.Second), 120*time.Second)
}
