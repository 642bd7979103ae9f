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
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// matrixColumn is one column of the matrix table and of data.csv.
type matrixColumn struct {
	// header is the table's, csv the CSV's (snake case, unit last).
	header, csv string
	// decimals formats the value.
	decimals int
	// value returns the cell's value, and false where it was not measured.
	value func(r cellResult) (float64, bool)
}

func always(f func(r cellResult) float64) func(r cellResult) (float64, bool) {
	return func(r cellResult) (float64, bool) { return f(r), true }
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentileMS is the p-th percentile of ds in milliseconds; not measured when ds is empty.
func percentileMS(ds func(r cellResult) []time.Duration, p float64) func(r cellResult) (float64, bool) {
	return func(r cellResult) (float64, bool) {
		if len(ds(r)) == 0 {
			return 0, false
		}
		return ms(percentiles(ds(r), p)[0]), true
	}
}

func perIdleMinute(f func(c idleCost) float64) func(r cellResult) (float64, bool) {
	return func(r cellResult) (float64, bool) {
		if r.idle.window == 0 {
			return 0, false
		}
		return f(r.idle) / r.idle.window.Minutes(), true
	}
}

func rss(m memSample) uint64  { return m.rss }
func heap(m memSample) uint64 { return m.heapInuse }

// matrixColumns are the table's columns, left to right.
var matrixColumns = []matrixColumn{
	{"N (pods)", "n", 0, always(func(r cellResult) float64 { return float64(r.n) })},
	{"K", "k", 0, always(func(r cellResult) float64 { return float64(r.k) })},
	{"entries", "entries", 0, always(func(r cellResult) float64 { return float64(r.n * r.k) })},
	{"raw create (s)", "raw_create_s", 2, always(func(r cellResult) float64 { return r.ceiling.create.Seconds() })},
	{"raw list (s)", "raw_list_s", 3, always(func(r cellResult) float64 { return r.ceiling.list.Seconds() })},
	{"bulk (s)", "bulk_s", 2, always(func(r cellResult) float64 { return r.bulk.Seconds() })},
	{"bulk / raw create", "bulk_over_raw_create", 2, always(func(r cellResult) float64 { return r.bulk.Seconds() / r.ceiling.create.Seconds() })},
	{"start-up to ready (s)", "startup_s", 3, func(r cellResult) (float64, bool) { return r.startup.Seconds(), r.startup > 0 }},
	{"start-up / raw list", "startup_over_raw_list", 2, func(r cellResult) (float64, bool) {
		return r.startup.Seconds() / r.ceiling.list.Seconds(), r.startup > 0
	}},
	{"restart writes", "restart_writes", 0, func(r cellResult) (float64, bool) { return r.restartWrites.total(), r.restartDone }},
	{"p50 (ms)", "p50_ms", 1, percentileMS(func(r cellResult) []time.Duration { return r.steady }, 50)},
	{"p99 (ms)", "p99_ms", 1, percentileMS(func(r cellResult) []time.Duration { return r.steady }, 99)},
	{"p50 in resync (ms)", "resync_p50_ms", 1, percentileMS(func(r cellResult) []time.Duration { return r.duringResync }, 50)},
	{"p99 in resync (ms)", "resync_p99_ms", 1, percentileMS(func(r cellResult) []time.Duration { return r.duringResync }, 99)},
	{"resync duty", "resync_duty", 2, func(r cellResult) (float64, bool) { return r.resyncDuty, r.resyncDuty >= 0 }},
	{"CPU / resync at rest (s)", "rest_resync_cpu_s", 2, func(r cellResult) (float64, bool) { return r.resyncCPU, r.resyncCPU > 0 }},
	{"RSS (MiB)", "rss_mib", 1, always(func(r cellResult) float64 { return mib(r.loaded.rss) })},
	{"RSS / pod (B)", "rss_per_pod_bytes", 0, always(func(r cellResult) float64 { return r.perPod(rss) })},
	{"RSS / entry (B)", "rss_per_entry_bytes", 0, always(func(r cellResult) float64 { return r.perEntry(rss) })},
	{"heap / pod (B)", "heap_per_pod_bytes", 0, always(func(r cellResult) float64 { return r.perPod(heap) })},
	{"heap / entry (B)", "heap_per_entry_bytes", 0, always(func(r cellResult) float64 { return r.perEntry(heap) })},
	{"idle CPU (s/min)", "idle_cpu_s_per_min", 3, perIdleMinute(func(c idleCost) float64 { return c.cpu })},
	{"idle ListEntries (/min)", "idle_list_entries_per_min", 1, perIdleMinute(func(c idleCost) float64 { return c.lists })},
	{"idle GCs (/min)", "idle_gcs_per_min", 1, perIdleMinute(func(c idleCost) float64 { return c.gcs })},
}

func (c matrixColumn) format(r cellResult) string {
	v, ok := c.value(r)
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'f', c.decimals, 64)
}

// matrixMarkdown renders the results as one table, a line per controller and cell, with the
// conditions they were taken under and what the columns mean.
func matrixMarkdown(results []cellResult, o options, when time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## spire-registrar scale bench, %s\n\n", when.Format(time.RFC3339))
	fmt.Fprintf(&b, "%d CPUs, %s; spire-registrar as its binary with %d workers; spire-controller-manager v0.7.0 with enableEntryRenderCache and gcInterval %v; "+
		"pods created by %d concurrent clients; %d pods one at a time for each latency (spire-controller-manager: %d); idle window %v; full resyncs every %v after the restart.\n\n",
		runtime.NumCPU(), runtime.Version(), o.workers, scmGCInterval, o.concurrency, o.steady, o.scmSteady, o.idle, o.resyncInterval)
	b.WriteString("| controller | datastore |")
	for _, c := range matrixColumns {
		fmt.Fprintf(&b, " %s |", c.header)
	}
	b.WriteString("\n|---|---|")
	for range matrixColumns {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s |", r.controller, r.datastore)
		for _, c := range matrixColumns {
			v := c.format(r)
			if v == "" {
				v = "–"
			}
			fmt.Fprintf(&b, " %s |", v)
		}
		b.WriteString("\n")
	}
	b.WriteString(matrixLegend)
	return b.String()
}

// matrixLegend says how each column was measured.
const matrixLegend = `
- raw create: a tight client creates the N×K entries in batches of 500 (the controller's batch size), one RPC after the other, on a fresh SPIRE server of the same datastore. raw list: one full ListEntries of them, every field, pages of -raw-page-size.
- bulk: from the first of N pod creates until SPIRE holds all N×K entries (then checked: exactly K per pod, no duplicate, nothing stray).
- start-up to ready: spire-registrar restarted with every entry in SPIRE, from process start until /readyz answers (its first full resync done). restart writes: SPIRE's own telemetry count of entry creates, updates and deletes from the stop until at least three full resyncs after the restart; must be 0. CPU / resync at rest: the process's CPU seconds over two of those resyncs, per resync, with no pod changing; at the default gcInterval of 5m a user's idle CPU is the idle CPU plus a fifth of it a minute. spire-controller-manager: until two gcIntervals after its first listing; its start-up probe entry (one create, one delete) counts.
- p50/p99: one pod created at a time, from the create call until SPIRE serves all K of its entries, polled every 2 ms. "in resync": the same after the restart, with gcInterval -resync-interval so that full resyncs run back to back; resync duty is the share of that phase a resync ran (resyncs × the last one's duration / phase time).
- RSS and heap: the controller process's VmRSS and exported go_memstats_heap_inuse_bytes after the bulk, each sampled right after a garbage collection (spire-registrar: asked for through --profiling; spire-controller-manager: the runtime's own, at most 2 minutes away), and per pod and per entry above the ready, empty process sampled the same way.
- idle: over the idle window after the steady-state pods, the controller process's CPU seconds and the ListEntries RPCs SPIRE served (one per page of a listing), per minute. spire-registrar's window is kept between its periodic full resyncs (measured again when one falls in it); spire-controller-manager's includes its gcInterval loop, which is all it does at rest. idle GCs: the process's garbage collections in the window; at rest the Go runtime forces one every 2 minutes, which marks the whole live heap.
`

// matrixCSV renders the results wide: a header line, then one line per controller and cell.
func matrixCSV(results []cellResult) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	header := []string{"controller", "datastore"}
	for _, c := range matrixColumns {
		header = append(header, c.csv)
	}
	if err := w.Write(header); err != nil {
		return nil, err
	}
	for _, r := range results {
		line := []string{r.controller, r.datastore}
		for _, c := range matrixColumns {
			line = append(line, c.format(r))
		}
		if err := w.Write(line); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// writeMatrix writes table.md, data.csv and the plots into dir.
func writeMatrix(dir string, results []cellResult, o options, started time.Time) error {
	if err := os.WriteFile(filepath.Join(dir, "table.md"), []byte(matrixMarkdown(results, o, started)), 0o644); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	data, err := matrixCSV(results)
	if err != nil {
		return fmt.Errorf("render CSV: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.csv"), data, 0o644); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	for name, c := range matrixPlots(results) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(c.svg()), 0o644); err != nil {
			return fmt.Errorf("write plot: %w", err)
		}
	}
	return nil
}
