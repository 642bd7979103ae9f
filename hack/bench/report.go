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

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// result is everything measured for one N.
type result struct {
	n   int
	raw rawResult
	// podsCreated runs from just before the first pod create to the return of the last;
	// converged from the same start until SPIRE held an entry for every pod.
	podsCreated, converged time.Duration
	// writes is the controller's write traffic until convergence.
	writes spire.BatchingStats
	// convergeCPU is the CPU the bench process and each component spent from the first pod
	// create to convergence.
	convergeCPU cpuSample
	peakRSS     uint64
	// rssPerPod and heapPerPod are the growth per pod from before the pods to convergence;
	// -1 when not measurable.
	rssPerPod, heapPerPod float64

	// steady holds per-pod latencies; nil when not measured for this N.
	steady []time.Duration
	// idle is the idle window's length; zero when not measured for this N.
	idle      time.Duration
	idleLists float64
	idleCPU   cpuSample
}

// row is one line of the report: a metric with one value per N ("" where not measured).
type row struct {
	metric, unit string
	values       []string
}

func rows(results []result) []row {
	col := func(f func(r result) string) []string {
		out := make([]string, len(results))
		for i, r := range results {
			out[i] = f(r)
		}
		return out
	}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) }
	rate := func(n int, d time.Duration) string {
		if d <= 0 {
			return ""
		}
		return strconv.FormatFloat(float64(n)/d.Seconds(), 'f', 0, 64)
	}
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
	}
	bytesPerPod := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	cpu := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	steady := func(i int) func(r result) string {
		return func(r result) string {
			if r.steady == nil {
				return ""
			}
			return ms(percentiles(r.steady, 50, 90, 99, 100)[i])
		}
	}
	idle := func(f func(r result) string) func(r result) string {
		return func(r result) string {
			if r.idle == 0 {
				return ""
			}
			return f(r)
		}
	}
	return []row{
		{"SPIRE raw create, batches of 500 (ceiling)", "s", col(func(r result) string { return secs(r.raw.create) })},
		{"SPIRE raw create throughput", "entries/s", col(func(r result) string { return rate(r.n, r.raw.create) })},
		{"spire-server CPU per raw-created entry", "ms", col(func(r result) string {
			if r.raw.createCPU < 0 {
				return "n/a"
			}
			return strconv.FormatFloat(r.raw.createCPU*1000/float64(r.n), 'f', 2, 64)
		})},
		{"SPIRE raw delete, batches of 500", "s", col(func(r result) string { return secs(r.raw.delete) })},
		{"SPIRE raw delete throughput", "entries/s", col(func(r result) string { return rate(r.n, r.raw.delete) })},
		{"pods created in kube-apiserver", "s", col(func(r result) string { return secs(r.podsCreated) })},
		{"pod create rate", "pods/s", col(func(r result) string { return rate(r.n, r.podsCreated) })},
		{"controller: first pod create to all entries in SPIRE", "s", col(func(r result) string { return secs(r.converged) })},
		{"controller throughput", "entries/s", col(func(r result) string { return rate(r.n, r.converged) })},
		{"controller time / SPIRE raw create time", "x", col(func(r result) string {
			return strconv.FormatFloat(r.converged.Seconds()/r.raw.create.Seconds(), 'f', 1, 64)
		})},
		{"convergence after the last pod create", "s", col(func(r result) string { return secs(r.converged - r.podsCreated) })},
		{"controller write calls (pod syncs)", "calls", col(func(r result) string { return strconv.FormatInt(r.writes.Calls, 10) })},
		{"SPIRE write RPCs after batching", "RPCs", col(func(r result) string { return strconv.FormatInt(r.writes.Batches, 10) })},
		{"mean items per write RPC", "items", col(func(r result) string {
			if r.writes.Batches == 0 {
				return ""
			}
			return strconv.FormatFloat(float64(r.writes.Items)/float64(r.writes.Batches), 'f', 1, 64)
		})},
		{"CPU during convergence: bench process (controller + pod-creating client)", "s", col(func(r result) string { return cpu(r.convergeCPU.self) })},
		{"CPU during convergence: spire-server", "s", col(func(r result) string { return cpu(r.convergeCPU.spire) })},
		{"CPU during convergence: kube-apiserver", "s", col(func(r result) string { return cpu(r.convergeCPU.apiserver) })},
		{"CPU during convergence: etcd", "s", col(func(r result) string { return cpu(r.convergeCPU.etcd) })},
		{"CPU available during convergence (cores x time)", "s", col(func(r result) string {
			return cpu(float64(runtime.NumCPU()) * r.converged.Seconds())
		})},
		{"peak RSS of the process so far (ru_maxrss)", "MiB", col(func(r result) string {
			return strconv.FormatFloat(float64(r.peakRSS)/(1<<20), 'f', 1, 64)
		})},
		{"RSS growth per pod (VmRSS after GC, vs before pods)", "B/pod", col(func(r result) string { return bytesPerPod(r.rssPerPod) })},
		{"heap in use growth per pod (after GC)", "B/pod", col(func(r result) string { return bytesPerPod(r.heapPerPod) })},
		{"steady state: pod create to entry served, p50", "ms", col(steady(0))},
		{"steady state p90", "ms", col(steady(1))},
		{"steady state p99", "ms", col(steady(2))},
		{"steady state max", "ms", col(steady(3))},
		{"steady state pods", "pods", col(func(r result) string {
			if r.steady == nil {
				return ""
			}
			return strconv.Itoa(len(r.steady))
		})},
		{"idle window", "s", col(idle(func(r result) string { return secs(r.idle) }))},
		{"idle: ListEntries RPCs served by SPIRE", "RPCs", col(idle(func(r result) string { return strconv.FormatFloat(r.idleLists, 'f', 0, 64) }))},
		{"idle: bench process CPU (controller at rest)", "s", col(idle(func(r result) string { return cpu(r.idleCPU.self) }))},
		{"idle: spire-server CPU", "s", col(idle(func(r result) string { return cpu(r.idleCPU.spire) }))},
	}
}

// markdown renders the results as one table, metrics down, N across, with the conditions
// the numbers were taken under.
func markdown(results []result, o options, when time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## spire-registrar bench, %s\n\n", when.Format(time.RFC3339))
	fmt.Fprintf(&b, "%d CPUs (GOMAXPROCS %d), %s, %d controller workers, batching MaxBatch %d and Linger %v, pods created by %d concurrent clients; "+
		"controller, informers and pod-creating client share one process, so CPU and memory include the bench's client.\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), o.workers, o.batching.MaxBatch, o.batching.Linger, o.concurrency)
	b.WriteString("| metric | unit |")
	for _, r := range results {
		fmt.Fprintf(&b, " N=%d |", r.n)
	}
	b.WriteString("\n|---|---|")
	for range results {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, rw := range rows(results) {
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

// csvReport renders the results in long form: one line per N and metric.
func csvReport(results []result) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write([]string{"n", "metric", "unit", "value"}); err != nil {
		return nil, err
	}
	for _, rw := range rows(results) {
		for i, v := range rw.values {
			if v == "" {
				continue
			}
			if err := w.Write([]string{strconv.Itoa(results[i].n), rw.metric, rw.unit, v}); err != nil {
				return nil, err
			}
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}
