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
	"runtime"
	"strconv"
	"strings"
	"time"
)

// rolloutRows are the rollout report's lines, one value per result (column).
func rolloutRows(results []rolloutResult) []row {
	col := func(f func(r rolloutResult) string) []string {
		out := make([]string, len(results))
		for i, r := range results {
			out[i] = f(r)
		}
		return out
	}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) }
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
	}
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	cpu := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	latency := func(i int) func(r rolloutResult) string {
		return func(r rolloutResult) string {
			if len(r.latencies) == 0 {
				return ""
			}
			return ms(percentiles(r.latencies, 50, 90, 99, 100)[i])
		}
	}
	perReplaced := func(f func(w entryWrites) float64) func(r rolloutResult) string {
		return func(r rolloutResult) string {
			if r.replaced == 0 {
				return ""
			}
			return strconv.FormatFloat(f(r.writes)/float64(r.replaced), 'f', 2, 64)
		}
	}
	return []row{
		{"Deployment created → an entry for every pod", "s", col(func(r rolloutResult) string { return secs(r.initial) })},
		{"rollout: template changed → SPIRE holds exactly the new pods' entries", "s", col(func(r rolloutResult) string { return secs(r.converged) })},
		{"old pods replaced", "pods", col(func(r rolloutResult) string { return strconv.Itoa(r.replaced) })},
		{"pod scheduled → entry served, p50", "ms", col(latency(0))},
		{"pod scheduled → entry served, p90", "ms", col(latency(1))},
		{"pod scheduled → entry served, p99", "ms", col(latency(2))},
		{"pod scheduled → entry served, max", "ms", col(latency(3))},
		{"new pods measured", "pods", col(func(r rolloutResult) string { return strconv.Itoa(len(r.latencies)) })},
		{"new pods not measured (scheduling or entry unseen)", "pods", col(func(r rolloutResult) string { return strconv.Itoa(r.unmeasured) })},
		{"SPIRE entry creates (datastore)", "entries", col(func(r rolloutResult) string { return count(r.writes.creates) })},
		{"SPIRE entry updates (datastore)", "entries", col(func(r rolloutResult) string { return count(r.writes.updates) })},
		{"SPIRE entry deletes (datastore)", "entries", col(func(r rolloutResult) string { return count(r.writes.deletes) })},
		{"creates per replaced pod (ideal 1)", "x", col(perReplaced(func(w entryWrites) float64 { return w.creates }))},
		{"updates per replaced pod (ideal 0)", "x", col(perReplaced(func(w entryWrites) float64 { return w.updates }))},
		{"deletes per replaced pod (ideal 1)", "x", col(perReplaced(func(w entryWrites) float64 { return w.deletes }))},
		{"SPIRE BatchCreateEntry / BatchUpdateEntry / BatchDeleteEntry RPCs", "RPCs", col(func(r rolloutResult) string {
			return count(r.writes.createRPCs) + " / " + count(r.writes.updateRPCs) + " / " + count(r.writes.deleteRPCs)
		})},
		{fmt.Sprintf("SPIRE entry writes in the %v after convergence", settleTime), "entries", col(func(r rolloutResult) string { return count(r.late.total()) })},
		{"rounds of per-pod SPIRE queries", "rounds", col(func(r rolloutResult) string { return strconv.Itoa(len(r.rounds)) })},
		{"query round p50 / max (an entry's first-seen is late by up to one)", "ms", col(func(r rolloutResult) string {
			if len(r.rounds) == 0 {
				return ""
			}
			p := percentiles(r.rounds, 50, 100)
			return ms(p[0]) + " / " + ms(p[1])
		})},
		{"Ready flaps (False and back) during the rollout", "pods", col(func(r rolloutResult) string { return strconv.Itoa(r.flaps) })},
		{"CPU during the rollout: bench process (controller + pod watch + SPIRE polling)", "s", col(func(r rolloutResult) string { return cpu(r.cpu.self) })},
		{"CPU during the rollout: spire-server", "s", col(func(r rolloutResult) string { return cpu(r.cpu.spire) })},
		{"CPU during the rollout: PostgreSQL", "s", col(func(r rolloutResult) string {
			if r.datastore != datastorePostgres {
				return ""
			}
			return cpu(r.postgresCPU)
		})},
		{"CPU during the rollout: kube-apiserver", "s", col(func(r rolloutResult) string { return cpu(r.cpu.apiserver) })},
		{"CPU available during the rollout (cores x time)", "s", col(func(r rolloutResult) string {
			return cpu(float64(runtime.NumCPU()) * r.converged.Seconds())
		})},
	}
}

// rolloutColumn names a result's column.
func rolloutColumn(r rolloutResult) string { return fmt.Sprintf("%s N=%d", r.datastore, r.n) }

// rolloutMarkdown renders the rollout results as one table, metrics down, datastore and N
// across, with the conditions the numbers were taken under.
func rolloutMarkdown(results []rolloutResult, o options, when time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## spire-registrar rollout bench, %s\n\n", when.Format(time.RFC3339))
	fmt.Fprintf(&b, "%d CPUs (GOMAXPROCS %d), %s, %d controller workers, batching MaxBatch %d and Linger %v. "+
		"Full world (kube-scheduler, kube-controller-manager, kwok); a Deployment of N replicas rolled out to a new template "+
		"with maxSurge %s and maxUnavailable %s; kwok moves pods through its stages, Ready flaps asked for at %g a second on top; "+
		"a fresh SPIRE server per column; the scheduled pods without an entry yet asked for in SPIRE by their selector, %d at a time, every %v. "+
		"Entry writes come from spire-server's telemetry, from the template change to convergence.\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), o.workers, o.batching.MaxBatch, o.batching.Linger,
		rolloutMaxSurge.String(), rolloutMaxUnavailable.String(), o.flapsPerSecond, pollConcurrency, o.poll)
	b.WriteString("| metric | unit |")
	for _, r := range results {
		fmt.Fprintf(&b, " %s |", rolloutColumn(r))
	}
	b.WriteString("\n|---|---|")
	for range results {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, rw := range rolloutRows(results) {
		fmt.Fprintf(&b, "| %s | %s |", rw.metric, rw.unit)
		for _, v := range rw.values {
			if v == "" {
				v = "–"
			}
			fmt.Fprintf(&b, " %s |", v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// rolloutCSV renders the rollout results in long form: one line per column and metric.
func rolloutCSV(results []rolloutResult) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write([]string{"datastore", "n", "metric", "unit", "value"}); err != nil {
		return nil, err
	}
	for _, rw := range rolloutRows(results) {
		for i, v := range rw.values {
			if v == "" {
				continue
			}
			if err := w.Write([]string{results[i].datastore, strconv.Itoa(results[i].n), rw.metric, rw.unit, v}); err != nil {
				return nil, err
			}
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}
