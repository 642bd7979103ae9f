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
	"io"
	"net/http"
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
	return p.fetch(ctx, "/debug/pprof/heap?gc=1", "heap-"+phase+".pb.gz")
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
		if err := p.fetch(ctx, path, "cpu-"+phase+".pb.gz"); err != nil {
			logf("CPU profile of %s: %v", phase, err)
		}
	}()
	return func() { <-done }
}

func (p profiler) fetch(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s: HTTP %d", path, resp.StatusCode)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(p.dir, file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("fetch %s: %w", path, err)
	}
	return f.Close()
}

// metrics saves a scrape of the controller's metrics to <dir>/metrics-<phase>.txt, so that
// its own view of a phase (sync and SPIRE write durations) can be read against the bench's.
func (p profiler) metrics(ctx context.Context, url, phase string) {
	body, err := scrape(ctx, url)
	if err == nil {
		err = os.WriteFile(filepath.Join(p.dir, "metrics-"+phase+".txt"), body, 0o644)
	}
	if err != nil {
		logf("metrics at %s: %v", phase, err)
	}
}

// profileDuration bounds a CPU profile to what pprof serves comfortably and the phase can
// fill.
func profileDuration(expected time.Duration) time.Duration {
	return min(max(expected, 5*time.Second), 120*time.Second)
}
