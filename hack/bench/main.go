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

// Command bench measures spire-registrar against real components: etcd, kube-apiserver,
// spire-server (on sqlite or on a private PostgreSQL cluster) and spire-controller-manager
// v0.7.0, started on loopback by pkg/testing/realcluster.
//
// The default mode, -mode matrix, is the scale bench. For every cell of -n × -k ×
// -datastores it starts a fresh SPIRE server (a new PostgreSQL database, or sqlite), and
// measures:
//
//   - SPIRE's ceiling, on a server of its own: a tight client creating the N×K entries in
//     batches of 500, the controller's batch size, and one full ListEntries of them;
//   - spire-registrar, built with go build ./cmd/spire-registrar and run as its own process
//     with K ClusterSPIFFEIDs each selecting every pod: bulk convergence (first of N pod
//     creates until SPIRE holds all N×K entries, then checked exact), pod → entry latency of
//     -steady pods created one at a time (SPIRE polled every 2 ms), the idle window's CPU and
//     ListEntries, then a restart with every entry in SPIRE: the time to ready, SPIRE's entry
//     writes until three full resyncs are done (which must be 0), and the latency again with
//     full resyncs back to back (gcInterval -resync-interval). RSS is the process's VmRSS and
//     heap its go_memstats_heap_inuse_bytes, both right after a garbage collection, per pod and per entry above the ready, empty
//     process;
//   - spire-controller-manager in the cells with N ≤ -scm-max, configured as a user at that
//     size would (enableEntryRenderCache, gcInterval 10s): the same but for the start-up time
//     and the latency during resyncs, with -scm-steady pods.
//
// It prints progress with timestamps on stderr and writes -out/<timestamp>/table.md, data.csv
// and the plots latency.svg, memory.svg and times.svg, rewritten after every cell; each
// controller's config and logs go under logs/. Flags of this mode:
//
//	-n 1000,10000,30000   pod counts N
//	-k 1,10               ClusterSPIFFEIDs K, each selecting every pod: N×K entries
//	-datastores postgres,sqlite
//	-scm-max 10000        spire-controller-manager in the cells with N up to this; 0 never
//	-steady 200           pods one at a time for each of spire-registrar's latencies; 0 skips
//	-scm-steady 50        the same for spire-controller-manager, whose latency can reach 10 s
//	-idle 60s             idle window; 0 skips
//	-resync-interval 100ms  spire-registrar's gcInterval after the restart
//	-raw-page-size 1000   page size of the raw listing
//	-workers 10 -concurrency 32 -timeout 2h -out results
//
// For example, one small cell: go run ./hack/bench -n 1000 -k 2 -datastores postgres -scm-max 0.
//
// -mode converge tunes the write path: in the light world, one ClusterSPIFFEID and the
// controller in-process, writing through spire.BatchingClient (-max-batch, -linger), with the
// CPU of every component during the bulk and, with -cpuprofile, a CPU profile of it. For each N
// it measures SPIRE's own write ceiling, then the time from the first of N pod creates until
// SPIRE holds an entry for every pod; at the largest N also the latency of single pod events
// and what the controller costs at rest. It writes bench-<timestamp>.md and .csv under -out.
//
// -mode podcert measures the pod certificate signer: N PodCertificateRequests (default 1000)
// made as the node, one at a time for p50/p99 from create to issued chain, then all at once by
// -concurrency callers for the requests per second one replica sustains (see podcert.go).
//
// -mode podcert-flood measures fairness and cost: N requests (default 1000) for pods of one
// namespace that no ClusterSPIFFEID selects, and 100 for pods of another namespace that one
// does, made once the flood has begun; how long the good ones take to be issued, the flood to
// be denied, and the kube-apiserver calls meanwhile (see podcertflood.go).
//
// -mode rollout works in the full world (kube-scheduler, kube-controller-manager and kwok
// too): for each N (500 unless -n says otherwise) and each datastore of -datastores, a fresh
// SPIRE server on it, a Deployment of N replicas, and a rollout of a new template under pod
// status churn. It reports the time until SPIRE holds exactly the new pods' entries, the pod
// scheduled → entry latencies during the rollout, SPIRE's entry writes by kind from its
// telemetry, and CPU.
//
//	go run ./hack/bench [-n 1000,10000,30000] [-k 1,10] [-datastores postgres,sqlite] [-scm-max 10000]
//	go run ./hack/bench -mode converge [-n 1000,5000] [-steady 200] [-idle 60s]
//	go run ./hack/bench -mode rollout [-n 500] [-datastores sqlite,postgres] [-flaps 20]
//	go run ./hack/bench -mode podcert [-n 1000] [-concurrency 32]
//	go run ./hack/bench -mode podcert-flood [-n 1000] [-concurrency 32] [-wait-for-identity 0s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// options are the command line flags.
type options struct {
	mode        string
	sizes       []int
	steady      int
	idle        time.Duration
	out         string
	workers     int
	batching    spire.BatchingOptions
	concurrency int
	timeout     time.Duration
	cpuProfile  string

	// Matrix mode only:
	ks             []int
	scmMax         int
	scmSteady      int
	resyncInterval time.Duration
	rawPageSize    int
	profiles       bool

	// Matrix and rollout modes:
	datastores []string

	// Rollout mode only:
	poll           time.Duration
	flapsPerSecond float64

	// Pod certificate flood mode only: negative leaves spire-registrar's default.
	waitForIdentity time.Duration
}

const (
	modeMatrix   = "matrix"
	modeConverge = "converge"
	modeRollout  = "rollout"
	modePodCert  = "podcert"
	modePodFlood = "podcert-flood"

	datastoreSQLite   = "sqlite"
	datastorePostgres = "postgres"

	// defaultRolloutSize is the rollout mode's N when -n is not given.
	defaultRolloutSize = 500
	// defaultMatrixSizes is the matrix mode's -n when not given: the field's sizes.
	defaultMatrixSizes = "1000,10000,30000"
)

func main() {
	klog.InitFlags(nil)
	var o options
	flag.StringVar(&o.mode, "mode", modeMatrix, "matrix: N × K × datastore cells, spire-registrar as its binary and spire-controller-manager; converge: N pods, one ClusterSPIFFEID, controller in-process; rollout: a Deployment of N replicas rolled out, full world; podcert: N PodCertificateRequests signed")
	sizes := flag.String("n", "1000,5000", "comma-separated pod counts N to measure, each with a fresh SPIRE server (matrix mode default "+defaultMatrixSizes+"; rollout mode: replicas, default 500)")
	ks := flag.String("k", "1,10", "matrix mode: comma-separated counts K of ClusterSPIFFEIDs, each selecting every pod: N×K entries")
	datastores := flag.String("datastores", datastorePostgres+","+datastoreSQLite, "matrix and rollout modes: comma-separated SPIRE datastores to measure: postgres, sqlite")
	flag.IntVar(&o.scmMax, "scm-max", 10000, "matrix mode: measure spire-controller-manager v0.7.0 too in the cells with N up to this; 0 never")
	flag.IntVar(&o.scmSteady, "scm-steady", 50, "matrix mode: pods created one at a time to measure spire-controller-manager's latency, which can reach its gcInterval per pod; 0 skips")
	flag.DurationVar(&o.resyncInterval, "resync-interval", 100*time.Millisecond, "matrix mode: spire-registrar's gcInterval after the restart, so that full resyncs run back to back while latency is measured")
	flag.BoolVar(&o.profiles, "profiles", true, "matrix mode: run spire-registrar with --profiling and write CPU profiles of its bulk, restart and resync phases and a heap profile at load into each cell's logs directory")
	flag.IntVar(&o.rawPageSize, "raw-page-size", spire.DefaultPageSize, "matrix mode: page size of SPIRE's raw full listing")
	flag.DurationVar(&o.poll, "poll", 5*time.Millisecond, "rollout mode: pause between the SPIRE listings that see entries appear")
	flag.Float64Var(&o.flapsPerSecond, "flaps", 20, "rollout mode: Running pods whose Ready condition is set False and back per second; 0 leaves churn to kwok")
	flag.IntVar(&o.steady, "steady", 200, "pods created one at a time to measure pod → entry latency (matrix mode: in every cell, and again during full resyncs; converge mode: at the largest N); 0 skips")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "idle window over which SPIRE's ListEntries count and the controller's CPU are measured (matrix mode: every cell; converge mode: the largest N); 0 skips")
	flag.StringVar(&o.out, "out", "results", "directory the results are written under (matrix mode: in a new <timestamp> directory)")
	flag.IntVar(&o.workers, "workers", 10, "controller workers (spire-registrar's --workers; 10 is its default)")
	flag.IntVar(&o.batching.MaxBatch, "max-batch", spire.DefaultBatchSize, "converge and rollout modes: BatchingOptions.MaxBatch of the in-process controller's SPIRE client")
	flag.DurationVar(&o.batching.Linger, "linger", spire.DefaultLinger, "converge and rollout modes: BatchingOptions.Linger of the in-process controller's SPIRE client")
	flag.IntVar(&o.concurrency, "concurrency", 32, "concurrent pod create calls")
	flag.DurationVar(&o.waitForIdentity, "wait-for-identity", -1, "podcert-flood mode: spire-registrar's podCertificates.waitForIdentity; negative leaves its default")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Hour, "limit for each wait for convergence or readiness")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "converge mode: write a CPU profile of the largest N's convergence to this file")
	flag.Parse()

	var err error
	if o.mode == modeRollout && !flagSet("n") {
		*sizes = strconv.Itoa(defaultRolloutSize)
	}
	if o.mode == modeMatrix && !flagSet("n") {
		*sizes = defaultMatrixSizes
	}
	if o.ks, err = parseSizes(*ks); err != nil {
		fmt.Fprintf(os.Stderr, "bench: -k: %v\n", err)
		os.Exit(2)
	}
	if o.sizes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintf(os.Stderr, "bench: -n: %v\n", err)
		os.Exit(2)
	}
	if o.datastores, err = parseDatastores(*datastores); err != nil {
		fmt.Fprintf(os.Stderr, "bench: -datastores: %v\n", err)
		os.Exit(2)
	}
	if o.mode != modeMatrix && o.mode != modeConverge && o.mode != modeRollout && o.mode != modePodCert && o.mode != modePodFlood {
		fmt.Fprintf(os.Stderr, "bench: -mode: %q is not %s, %s, %s, %s or %s\n", o.mode, modeMatrix, modeConverge, modeRollout, modePodCert, modePodFlood)
		os.Exit(2)
	}
	if o.resyncInterval <= 0 || o.rawPageSize < 1 || o.scmMax < 0 || o.scmSteady < 0 {
		fmt.Fprintln(os.Stderr, "bench: -resync-interval and -raw-page-size must be positive, -scm-max and -scm-steady not negative")
		os.Exit(2)
	}
	if o.poll <= 0 || o.flapsPerSecond < 0 {
		fmt.Fprintln(os.Stderr, "bench: -poll must be positive, -flaps not negative")
		os.Exit(2)
	}
	if o.workers < 1 || o.concurrency < 1 || o.steady < 0 || o.idle < 0 {
		fmt.Fprintln(os.Stderr, "bench: -workers and -concurrency must be positive, -steady and -idle not negative")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := runMatrix
	switch o.mode {
	case modeConverge:
		run = runBench
	case modeRollout:
		run = runRolloutBench
	case modePodCert:
		run = runPodCertBench
	case modePodFlood:
		run = runPodCertFloodBench
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseDatastores(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f != datastoreSQLite && f != datastorePostgres {
			return nil, fmt.Errorf("%q is neither %s nor %s", f, datastoreSQLite, datastorePostgres)
		}
		out = append(out, f)
	}
	return out, nil
}

// flagSet says whether the named flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// logf prints progress to stderr; stdout carries only the table.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

func runBench(ctx context.Context, o options) error {
	started := time.Now()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	logf("starting etcd and kube-apiserver")
	cl, err := startCluster(ctx, logf, false)
	if err != nil {
		return err
	}
	defer cl.stop()

	largest := slices.Max(o.sizes)
	var results []result
	for _, n := range o.sizes {
		res, err := benchN(ctx, cl, n, o, n == largest)
		if err != nil {
			return fmt.Errorf("bench at N=%d: %w", n, err)
		}
		results = append(results, res)
	}

	table := markdown(results, o, started)
	fmt.Print(table)
	csvData, err := csvReport(results)
	if err != nil {
		return fmt.Errorf("render CSV: %w", err)
	}
	base := filepath.Join(o.out, "bench-"+started.Format("20060102-150405"))
	if err := os.WriteFile(base+".md", []byte(table), 0o644); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if err := os.WriteFile(base+".csv", csvData, 0o644); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	logf("wrote %s.md and %s.csv", base, base)
	return nil
}

// benchN measures one N. The largest N also gets the steady-state and idle measurements.
func benchN(ctx context.Context, cl *cluster, n int, o options, largest bool) (result, error) {
	res := result{n: n}
	logf("N=%d: SPIRE raw create and delete of %d entries", n, n)
	var err error
	if res.raw, err = rawThroughput(ctx, n, nil); err != nil {
		return res, err
	}
	logf("N=%d: raw create %v, delete %v", n, res.raw.create.Round(time.Millisecond), res.raw.delete.Round(time.Millisecond))

	name := fmt.Sprintf("bench-%d", n)
	r, err := cl.startRun(ctx, name, n, o.workers, o.batching)
	if err != nil {
		return res, err
	}
	defer func() {
		logf("N=%d: stopping the controller and SPIRE, deleting pods", n)
		r.stop(context.WithoutCancel(ctx))
	}()

	if largest && o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return res, fmt.Errorf("create CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, fmt.Errorf("start CPU profile: %w", err)
		}
		// Stopped at convergence; this covers the error paths (stopping twice is a no-op).
		defer pprof.StopCPUProfile()
	}
	before := takeMemSnapshot()
	cpuBefore := sampleCPU(r.spire.Dir(), cl.kube.Dir())
	logf("N=%d: creating %d pods on %d nodes", n, n, len(r.nodes))
	first, last, err := r.createPods(ctx, "pod", n, o.concurrency)
	if err != nil {
		return res, err
	}
	res.podsCreated = last.Sub(first)
	logf("N=%d: pods created in %v; waiting for entries", n, res.podsCreated.Round(time.Millisecond))
	converged, err := r.waitForCount(ctx, n, first, o.timeout)
	if err != nil {
		return res, err
	}
	res.converged = converged.Sub(first)
	res.convergeCPU = sampleCPU(r.spire.Dir(), cl.kube.Dir()).sub(cpuBefore)
	res.writes = r.batching.Stats()
	if largest && o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	after := takeMemSnapshot()
	res.peakRSS = peakRSS()
	res.rssPerPod = perPod(before.rss, after.rss, n)
	res.heapPerPod = perPod(before.heapInuse, after.heapInuse, n)
	logf("N=%d: converged in %v (%d write calls in %d RPCs)", n, res.converged.Round(time.Millisecond), res.writes.Calls, res.writes.Batches)
	if err := r.verify(ctx); err != nil {
		return res, fmt.Errorf("after convergence: %w", err)
	}

	if !largest {
		return res, nil
	}
	if o.steady > 0 {
		logf("N=%d: steady state, %d pods one at a time", n, o.steady)
		res.steady = make([]time.Duration, 0, o.steady)
		for i := range o.steady {
			d, err := r.podLatency(ctx, fmt.Sprintf("steady-%04d", i), 30*time.Second)
			if err != nil {
				return res, err
			}
			res.steady = append(res.steady, d)
		}
	}
	if o.idle > 0 {
		// Let delayed work (status updates are batched for a second) finish first.
		if err := sleep(ctx, 3*time.Second); err != nil {
			return res, err
		}
		logf("N=%d: idle window of %v", n, o.idle)
		listsBefore, err := scrapeCounter(ctx, r.spire.MetricsURL(), listEntriesMetric)
		if err != nil {
			return res, err
		}
		cpuBefore := sampleCPU(r.spire.Dir(), cl.kube.Dir())
		start := time.Now()
		if err := sleep(ctx, o.idle); err != nil {
			return res, err
		}
		listsAfter, err := scrapeCounter(ctx, r.spire.MetricsURL(), listEntriesMetric)
		if err != nil {
			return res, err
		}
		res.idleCPU = sampleCPU(r.spire.Dir(), cl.kube.Dir()).sub(cpuBefore)
		res.idle = time.Since(start)
		res.idleLists = listsAfter - listsBefore
	}
	return res, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
