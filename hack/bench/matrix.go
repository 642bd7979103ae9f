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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/controller/entry"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	controllerRegistrar = "spire-registrar"
	controllerSCM       = "spire-controller-manager"

	// fullResyncsMetric counts spire-registrar's full resyncs by controller and result.
	fullResyncsMetric = "spire_registrar_full_resyncs_total"
	// lastResyncDurationMetric is how long its last full resync took, by controller.
	lastResyncDurationMetric = "spire_registrar_last_full_resync_duration_seconds"
	// matrixSettle lets delayed work (batched status writes, the last syncs) end before a
	// measurement starts.
	matrixSettle = 3 * time.Second
	// scmGCInterval is spire-controller-manager's shipped gcInterval, which users keep.
	scmGCInterval = 10 * time.Second
)

// entryControllerLabel selects the entry controller's series of spire-registrar's metrics.
var entryControllerLabel = `controller="` + entry.ControllerName + `"`

// cellResult is what one controller measured in one cell of the matrix.
type cellResult struct {
	controller string
	datastore  string
	n, k       int
	ceiling    ceiling
	// bulk runs from the first pod create until SPIRE held all n×k entries.
	bulk time.Duration
	// startup runs from the restart of the controller, with every entry in SPIRE, until it was
	// ready; zero when not measured.
	startup time.Duration
	// restartWrites are SPIRE's entry writes from the stop of the controller until it had
	// finished its first full resyncs after the restart; -1 in total when not measured.
	restartWrites entryWrites
	restartDone   bool
	// steady and duringResync are pod create → all k entries served latencies; duringResync
	// was measured with full resyncs back to back (nil when not measured).
	steady, duringResync []time.Duration
	// resyncDuty is the share of the duringResync phase a full resync was running (from the
	// count of resyncs and the last one's duration); -1 when unknown.
	resyncDuty float64
	// resyncCPU is the controller's CPU seconds per full resync at rest; 0 when not measured.
	resyncCPU float64
	// baseline is the controller's memory when ready with no pods; loaded once it holds all
	// n pods and n×k entries.
	baseline, loaded memSample
	idle             idleCost
	// logDir holds the controller's logs and config.
	logDir string
}

// perPod is the memory growth from baseline to loaded per pod; perEntry per entry.
func (r cellResult) perPod(f func(memSample) uint64) float64 {
	return (float64(f(r.loaded)) - float64(f(r.baseline))) / float64(r.n)
}

func (r cellResult) perEntry(f func(memSample) uint64) float64 {
	return (float64(f(r.loaded)) - float64(f(r.baseline))) / float64(r.n*r.k)
}

// matrixWorld is what every cell shares: the light world, the PostgreSQL cluster of the
// postgres cells and the spire-registrar binary.
type matrixWorld struct {
	cl       *cluster
	postgres *realcluster.Postgres
	bin      string
	binDir   string
	outDir   string
	o        options
}

func (w *matrixWorld) stop() {
	if w.postgres != nil {
		if err := w.postgres.Stop(); err != nil {
			logf("stopping postgres: %v", err)
		}
	}
	if w.cl != nil {
		w.cl.stop()
	}
	if w.binDir != "" {
		_ = os.RemoveAll(w.binDir)
	}
}

// runMatrix is -mode matrix: every N × K × datastore cell with spire-registrar, and with
// spire-controller-manager where N ≤ -scm-max, into one table, a CSV and plots under
// -out/<timestamp>/, rewritten after every cell so that a long run can be read as it goes.
func runMatrix(ctx context.Context, o options) (err error) {
	started := time.Now()
	w := &matrixWorld{o: o, outDir: filepath.Join(o.out, started.Format("20060102-150405"))}
	if err := os.MkdirAll(w.outDir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	defer w.stop()
	logf("building spire-registrar")
	if w.bin, w.binDir, err = buildRegistrar(ctx); err != nil {
		return err
	}
	logf("starting etcd and kube-apiserver")
	if w.cl, err = startCluster(ctx, logf, false); err != nil {
		return err
	}
	if slices.Contains(o.datastores, datastorePostgres) {
		logf("starting PostgreSQL")
		if w.postgres, err = realcluster.StartPostgres(ctx, realcluster.PostgresOptions{Logf: logf}); err != nil {
			return err
		}
	}
	var results []cellResult
	total := len(o.sizes) * len(o.ks) * len(o.datastores)
	i := 0
	for _, n := range o.sizes {
		for _, k := range o.ks {
			for _, ds := range o.datastores {
				i++
				logf("cell %d/%d: N=%d K=%d on %s (%d entries)", i, total, n, k, ds, n*k)
				res, err := w.registrarCell(ctx, n, k, ds)
				if err != nil {
					return fmt.Errorf("spire-registrar at N=%d K=%d on %s: %w", n, k, ds, err)
				}
				results = append(results, res)
				if n <= o.scmMax {
					scm, err := w.scmCell(ctx, n, k, ds, res.ceiling)
					if err != nil {
						return fmt.Errorf("spire-controller-manager at N=%d K=%d on %s: %w", n, k, ds, err)
					}
					results = append(results, scm)
				}
				if err := writeMatrix(w.outDir, results, o, started); err != nil {
					return err
				}
			}
		}
	}
	fmt.Print(matrixMarkdown(results, o, started))
	logf("done in %v; wrote %s", time.Since(started).Round(time.Second), w.outDir)
	return nil
}

// postgresFor is the PostgreSQL cluster a cell's SPIRE keeps its datastore in; nil on sqlite.
func (w *matrixWorld) postgresFor(ds string) *realcluster.Postgres {
	if ds == datastorePostgres {
		return w.postgres
	}
	return nil
}

// registrarCell measures spire-registrar, as its real binary, in one cell.
func (w *matrixWorld) registrarCell(ctx context.Context, n, k int, ds string) (res cellResult, err error) {
	o := w.o
	res = cellResult{controller: controllerRegistrar, datastore: ds, n: n, k: k, resyncDuty: -1}
	name := fmt.Sprintf("reg-%s-%d-k%d", ds, n, k)
	logf("%s: SPIRE's ceiling: raw create and full list of %d entries", name, n*k)
	if res.ceiling, err = measureCeiling(ctx, n, k, o.rawPageSize, w.postgresFor(ds)); err != nil {
		return res, err
	}
	logf("%s: raw create %v, raw list %v", name, res.ceiling.create.Round(time.Millisecond), res.ceiling.list.Round(time.Millisecond))

	r, err := w.cl.startBareRun(ctx, name, max(1, n/podsPerNode), w.postgresFor(ds))
	if err != nil {
		return res, err
	}
	var proc *registrarProcess
	defer func() {
		logf("%s: stopping the controller and SPIRE, deleting pods", name)
		if proc != nil {
			if err := proc.stop(); err != nil {
				logf("%s: %v", name, err)
			}
		}
		r.stop(context.WithoutCancel(ctx))
		r.deleteClusterSPIFFEIDs(context.WithoutCancel(ctx), k)
	}()
	if err := r.createClusterSPIFFEIDs(ctx, k); err != nil {
		return res, err
	}
	res.logDir = filepath.Join(w.outDir, "logs", name)
	cfg := registrarConfig{className: name, spire: r.spire, kubeconfig: w.cl.kube.Kubeconfig(), workers: o.workers, profiling: o.profiles}
	if proc, _, err = startRegistrar(ctx, w.bin, res.logDir, "start", cfg, o.timeout); err != nil {
		return res, err
	}
	var prof *profiler
	if o.profiles {
		p := newProfiler(proc.metricsEndpoint(), res.logDir)
		prof = &p
	}
	if err := w.measureUnderLoad(ctx, r, &res, proc, name, k, o.steady, prof); err != nil {
		return res, err
	}

	logf("%s: restart with every entry in SPIRE, full resyncs every %v", name, o.resyncInterval)
	before, err := scrapeEntryWrites(ctx, r.spire.MetricsURL())
	if err != nil {
		return res, err
	}
	if err := proc.stop(); err != nil {
		return res, err
	}
	cfg.gcInterval = o.resyncInterval
	// Back to back: the worst case for pods synced during a resync.
	cfg.maxResyncShare = 1
	// The start-up is profiled over about the raw listing's time and the informers' lists.
	cfg.startupProfile = profileDuration(2*res.ceiling.list + 5*time.Second)
	if proc, res.startup, err = startRegistrar(ctx, w.bin, res.logDir, "restart", cfg, o.timeout); err != nil {
		proc = nil
		return res, err
	}
	proc.profileWait()
	// The first resync made it ready; two more prove that resyncs at rest write nothing, and
	// tell what one costs.
	if res.resyncCPU, err = restResyncCPU(ctx, proc, 2, o.timeout); err != nil {
		return res, err
	}
	if err := sleep(ctx, time.Second); err != nil {
		return res, err
	}
	after, err := scrapeEntryWrites(ctx, r.spire.MetricsURL())
	if err != nil {
		return res, err
	}
	res.restartWrites, res.restartDone = after.sub(before), true
	logf("%s: ready %v after the restart; SPIRE entry writes meanwhile: %v", name, res.startup.Round(time.Millisecond), res.restartWrites.total())

	if o.steady > 0 {
		logf("%s: %d pods one at a time during back-to-back full resyncs", name, o.steady)
		resyncs0, err := scrapeResyncs(ctx, proc.metricsEndpoint())
		if err != nil {
			return res, err
		}
		start := time.Now()
		profileWait := func() {}
		if o.profiles {
			profileWait = newProfiler(proc.metricsEndpoint(), res.logDir).cpu(ctx, "resync", 20*time.Second)
		}
		if res.duringResync, err = r.podLatencies(ctx, "resync", o.steady, k); err != nil {
			return res, err
		}
		elapsed := time.Since(start)
		profileWait()
		resyncs1, err := scrapeResyncs(ctx, proc.metricsEndpoint())
		if err != nil {
			return res, err
		}
		body, err := scrape(ctx, proc.metricsEndpoint())
		if err != nil {
			return res, err
		}
		last, err := sumSeries(body, lastResyncDurationMetric, entryControllerLabel)
		if err != nil {
			return res, err
		}
		res.resyncDuty = resyncDuty(resyncs1-resyncs0, last, elapsed)
	}
	if err := r.verifyK(ctx, k); err != nil {
		return res, fmt.Errorf("at the end: %w", err)
	}
	return res, nil
}

// bulk creates the cell's n pods and waits until SPIRE holds their n×k entries, then checks
// them.
// measureUnderLoad is the part of a cell both controllers go through alike, on the running
// process as first started: memory settled and empty, the bulk, memory loaded, the latency of steady pods
// created one at a time, and the idle window.
//
// prof, when not nil, profiles the bulk's CPU and the loaded heap.
func (w *matrixWorld) measureUnderLoad(ctx context.Context, r *run, res *cellResult, proc controllerProcess, name string, k, steady int, prof *profiler) error {
	var err error
	if err = sleep(ctx, matrixSettle); err != nil {
		return err
	}
	if res.baseline, err = sampleMemory(ctx, proc); err != nil {
		return err
	}
	profileWait := func() {}
	if prof != nil {
		profileWait = prof.cpu(ctx, "bulk", profileDuration(res.ceiling.create))
	}
	if err = w.bulk(ctx, r, res, name); err != nil {
		return err
	}
	profileWait()
	if err = sleep(ctx, matrixSettle); err != nil {
		return err
	}
	if res.loaded, err = sampleMemory(ctx, proc); err != nil {
		return err
	}
	if prof != nil {
		if err := prof.heap(ctx, "loaded"); err != nil {
			logf("%s: heap profile: %v", name, err)
		}
	}
	logf("%s: RSS %.1f → %.1f MiB, heap in use %.1f → %.1f MiB", name,
		mib(res.baseline.rss), mib(res.loaded.rss), mib(res.baseline.heapInuse), mib(res.loaded.heapInuse))
	if steady > 0 {
		logf("%s: steady state, %d pods one at a time", name, steady)
		if prof != nil {
			prof.metrics(ctx, proc.metricsEndpoint(), "before-steady")
			prof.metrics(ctx, r.spire.MetricsURL(), "spire-before-steady")
		}
		if res.steady, err = r.podLatencies(ctx, "steady", steady, k); err != nil {
			return err
		}
		if prof != nil {
			prof.metrics(ctx, proc.metricsEndpoint(), "after-steady")
			prof.metrics(ctx, r.spire.MetricsURL(), "spire-after-steady")
		}
	}
	if w.o.idle > 0 {
		logf("%s: idle window of %v", name, w.o.idle)
		var resyncs func(context.Context) (float64, error)
		if rp, ok := proc.(*registrarProcess); ok {
			resyncs = func(ctx context.Context) (float64, error) { return scrapeResyncs(ctx, rp.metricsEndpoint()) }
		}
		if res.idle, err = r.measureIdle(ctx, proc, resyncs, matrixSettle, w.o.idle); err != nil {
			return err
		}
	}
	return nil
}

func (w *matrixWorld) bulk(ctx context.Context, r *run, res *cellResult, name string) error {
	created0, err := scrapeCounter(ctx, r.spire.MetricsURL(), datastoreEntryCreateMetric)
	if err != nil {
		return err
	}
	logf("%s: creating %d pods on %d nodes", name, res.n, len(r.nodes))
	first, last, err := r.createPods(ctx, "pod", res.n, w.o.concurrency)
	if err != nil {
		return err
	}
	logf("%s: pods created in %v; waiting for %d entries", name, last.Sub(first).Round(time.Millisecond), res.n*res.k)
	done, err := r.waitEntries(ctx, res.n*res.k, created0, w.o.timeout)
	if err != nil {
		return err
	}
	res.bulk = done.Sub(first)
	logf("%s: bulk converged in %v (%.2f× the raw create)", name, res.bulk.Round(time.Millisecond), res.bulk.Seconds()/res.ceiling.create.Seconds())
	if err := r.verifyK(ctx, res.k); err != nil {
		return fmt.Errorf("after the bulk: %w", err)
	}
	return nil
}

// restResyncCPU waits for the next n full resyncs of a controller at rest and returns the
// CPU seconds it spent per resync meanwhile.
func restResyncCPU(ctx context.Context, proc *registrarProcess, n int, timeout time.Duration) (float64, error) {
	resyncs0, err := scrapeResyncs(ctx, proc.metricsEndpoint())
	if err != nil {
		return 0, err
	}
	cpu0, err := pidCPU(proc.pid())
	if err != nil {
		return 0, err
	}
	if err := waitResyncs(ctx, proc.metricsEndpoint(), int(resyncs0)+n, timeout); err != nil {
		return 0, err
	}
	cpu1, err := pidCPU(proc.pid())
	if err != nil {
		return 0, err
	}
	return (cpu1 - cpu0) / float64(n), nil
}

// resyncDuty is the share of a phase of back-to-back resyncs during which one ran: the
// resyncs that completed times the last one's duration, over the phase. When none completed,
// one resync outlasted the whole phase, which it spanned.
func resyncDuty(completed, lastSeconds float64, phase time.Duration) float64 {
	if completed == 0 {
		return 1
	}
	return min(1, completed*lastSeconds/phase.Seconds())
}

// scrapeResyncs reads how many full resyncs the entry controller completed successfully.
func scrapeResyncs(ctx context.Context, url string) (float64, error) {
	body, err := scrape(ctx, url)
	if err != nil {
		return 0, err
	}
	return sumSeries(body, fullResyncsMetric, entryControllerLabel, `result="success"`)
}

// waitResyncs waits until the entry controller has completed n successful full resyncs.
func waitResyncs(ctx context.Context, url string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := scrapeResyncs(ctx, url)
		if err != nil {
			return err
		}
		if got >= float64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v of %d full resyncs after %v", got, n, timeout)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// scmCell measures spire-controller-manager v0.7.0 in one cell, configured as a user at
// that size would: the entry render cache on and the shipped gcInterval.
func (w *matrixWorld) scmCell(ctx context.Context, n, k int, ds string, ceil ceiling) (res cellResult, err error) {
	o := w.o
	res = cellResult{controller: controllerSCM, datastore: ds, n: n, k: k, ceiling: ceil, resyncDuty: -1}
	name := fmt.Sprintf("scm-%s-%d-k%d", ds, n, k)
	r, err := w.cl.startBareRun(ctx, name, max(1, n/podsPerNode), w.postgresFor(ds))
	if err != nil {
		return res, err
	}
	var proc *scmProcess
	defer func() {
		logf("%s: stopping the controller and SPIRE, deleting pods", name)
		if proc != nil {
			if err := proc.stop(); err != nil {
				logf("%s: %v", name, err)
			}
		}
		r.stop(context.WithoutCancel(ctx))
		r.deleteClusterSPIFFEIDs(context.WithoutCancel(ctx), k)
	}()
	if err := r.createClusterSPIFFEIDs(ctx, k); err != nil {
		return res, err
	}
	res.logDir = filepath.Join(w.outDir, "logs", name)
	opts := realcluster.SCMOptions{
		Kubeconfig: w.cl.kube.Kubeconfig(),
		SPIRE:      r.spire,
		Config: realcluster.SCMConfig{
			ClusterName: clusterName, ClassName: name, GCInterval: scmGCInterval,
			Extra: map[string]any{"enableEntryRenderCache": true},
		},
	}
	if proc, err = startSCMProcess(ctx, opts, filepath.Join(res.logDir, "start")); err != nil {
		return res, err
	}
	// It creates and deletes a probe entry of its own at start: measureUnderLoad's first
	// settle lets that pass.
	if err := w.measureUnderLoad(ctx, r, &res, proc, name, k, o.scmSteady, nil); err != nil {
		return res, err
	}

	logf("%s: restart with every entry in SPIRE", name)
	before, err := scrapeEntryWrites(ctx, r.spire.MetricsURL())
	if err != nil {
		return res, err
	}
	lists0, err := scrapeCounter(ctx, r.spire.MetricsURL(), listEntriesMetric)
	if err != nil {
		return res, err
	}
	if err := proc.stop(); err != nil {
		return res, err
	}
	if proc, err = startSCMProcess(ctx, opts, filepath.Join(res.logDir, "restart")); err != nil {
		proc = nil
		return res, err
	}
	// Every reconcile lists SPIRE in full, page by page, once at start and then at least every
	// gcInterval: two intervals after its first page, the first reconcile, the one that
	// repairs what it finds, and the next are over.
	if err := waitCounter(ctx, r.spire.MetricsURL(), listEntriesMetric, lists0+1, o.timeout); err != nil {
		return res, err
	}
	if err := sleep(ctx, 2*scmGCInterval+matrixSettle); err != nil {
		return res, err
	}
	after, err := scrapeEntryWrites(ctx, r.spire.MetricsURL())
	if err != nil {
		return res, err
	}
	res.restartWrites, res.restartDone = after.sub(before), true
	logf("%s: SPIRE entry writes over the restart: %v (%v creates, %v updates, %v deletes)", name, res.restartWrites.total(),
		res.restartWrites.creates, res.restartWrites.updates, res.restartWrites.deletes)
	if err := r.verifyK(ctx, k); err != nil {
		return res, fmt.Errorf("at the end: %w", err)
	}
	return res, nil
}

// waitCounter waits until a counter of a Prometheus endpoint reaches want.
func waitCounter(ctx context.Context, url, name string, want float64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := scrapeCounter(ctx, url, name)
		if err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is %v after %v, want %v", name, got, timeout, want)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// scmProcess is spire-controller-manager started by realcluster, with its PID found from its
// config path.
type scmProcess struct {
	scm *realcluster.SCM
	p   int
}

func startSCMProcess(ctx context.Context, opts realcluster.SCMOptions, dir string) (*scmProcess, error) {
	opts.Dir = dir
	scm, err := realcluster.StartSCM(ctx, opts)
	if err != nil {
		return nil, err
	}
	pid, err := findPID(scm.ConfigPath())
	if err != nil {
		return nil, errors.Join(err, scm.Stop())
	}
	return &scmProcess{scm: scm, p: pid}, nil
}

func (s *scmProcess) pid() int                { return s.p }
func (s *scmProcess) metricsEndpoint() string { return s.scm.MetricsURL() }
func (s *scmProcess) stop() error             { return s.scm.Stop() }

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
