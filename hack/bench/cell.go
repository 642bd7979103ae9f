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
	"slices"
	"strings"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// controllerProcess is a controller under test running as a process of its own.
type controllerProcess interface {
	pid() int
	metricsEndpoint() string
	stop() error
}

// kTemplate is the SPIFFE ID template of the run's j-th ClusterSPIFFEID: every one selects
// every pod of the namespace, and gives it an ID of its own.
func kTemplate(j int) string {
	return fmt.Sprintf("spiffe://{{ .TrustDomain }}/k%d/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}", j)
}

// kSPIFFEID is what kTemplate renders for a pod.
func kSPIFFEID(td string, j int, namespace, pod string) string {
	return fmt.Sprintf("spiffe://%s/k%d/ns/%s/pod/%s", td, j, namespace, pod)
}

// createClusterSPIFFEIDs creates the run's k ClusterSPIFFEIDs, of the run's class, each
// selecting every pod of the run's namespace.
func (r *run) createClusterSPIFFEIDs(ctx context.Context, k int) error {
	for j := range k {
		name := fmt.Sprintf("%s-k%d", r.name, j)
		if _, err := r.c.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Create(ctx, &spirev1alpha1.ClusterSPIFFEID{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: spirev1alpha1.ClusterSPIFFEIDSpec{
				ClassName:        r.name,
				SPIFFEIDTemplate: kTemplate(j),
				NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: r.name},
				},
			},
		}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ClusterSPIFFEID %s: %w", name, err)
		}
	}
	return nil
}

// deleteClusterSPIFFEIDs removes what createClusterSPIFFEIDs made.
func (r *run) deleteClusterSPIFFEIDs(ctx context.Context, k int) {
	for j := range k {
		name := fmt.Sprintf("%s-k%d", r.name, j)
		if err := r.c.spireAPI.SpireV1alpha1().ClusterSPIFFEIDs().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			r.c.logf("deleting ClusterSPIFFEID %s: %v", name, err)
		}
	}
}

// waitEntries waits until SPIRE holds want entries and returns when the listing that saw them
// returned. SPIRE's own telemetry counts its entry creations at no cost to the datastore, so
// the entries are counted only once it has created want of them since createdBefore, and
// otherwise only now and then in case the counter is missing: a count lists every entry, which
// at 300k entries keeps SPIRE and its datastore busy for seconds.
func (r *run) waitEntries(ctx context.Context, want int, createdBefore float64, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var lastCount time.Time
	fallback := 5 * time.Second
	for {
		created, err := scrapeCounter(ctx, r.spire.MetricsURL(), datastoreEntryCreateMetric)
		if err != nil {
			return time.Time{}, err
		}
		if created-createdBefore >= float64(want) && time.Since(lastCount) >= 20*time.Millisecond || time.Since(lastCount) >= fallback {
			lastCount = time.Now()
			n, err := r.countEntries(ctx)
			if err != nil {
				return time.Time{}, err
			}
			// The fallback counts take at most a tenth of SPIRE's time.
			fallback = max(5*time.Second, 10*time.Since(lastCount))
			if n == want {
				return time.Now(), nil
			}
			if time.Now().After(deadline) {
				return time.Time{}, fmt.Errorf("timed out after %v with %d of %d entries", timeout, n, want)
			}
		}
		// Each scrape costs spire-server a little CPU: 40 a second keep that small.
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// verifyK checks that SPIRE holds, for every pod of the run's namespace, exactly the k
// entries the ClusterSPIFFEIDs declare, and nothing else.
func (r *run) verifyK(ctx context.Context, k int) error {
	pods, err := r.c.kubeClient.CoreV1().Pods(r.name).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	entries, err := listAllEntries(ctx, r.raw, 10000, &spiretypes.EntryMask{SpiffeId: true, Selectors: true})
	if err != nil {
		return err
	}
	return checkEntries(pods.Items, entries, k, r.spire.TrustDomain())
}

// checkEntries reports every way entries differ from exactly k entries per pod, with the
// SPIFFE IDs kTemplate renders, each carrying the pod's UID selector.
func checkEntries(pods []corev1.Pod, entries []*spiretypes.Entry, k int, td string) error {
	return checkPodEntries(pods, entries, func(pod corev1.Pod) []string {
		ids := make([]string, k)
		for j := range k {
			ids[j] = kSPIFFEID(td, j, pod.Namespace, pod.Name)
		}
		return ids
	})
}

// checkPodEntries reports every way entries differ from exactly the SPIFFE IDs want gives
// each pod, on entries carrying the pod's UID selector: missing, extra or duplicate entries,
// and entries of no pod.
func checkPodEntries(pods []corev1.Pod, entries []*spiretypes.Entry, want func(corev1.Pod) []string) error {
	byUID := map[types.UID][]string{}
	seen := map[string]int{}
	var errs []error
	for _, e := range entries {
		id := "spiffe://" + e.GetSpiffeId().GetTrustDomain() + e.GetSpiffeId().GetPath()
		seen[id]++
		uid := render.PodUIDOf(e)
		if uid == "" {
			errs = append(errs, fmt.Errorf("stray entry %s (%s) has no pod UID selector", e.GetId(), id))
			continue
		}
		byUID[uid] = append(byUID[uid], id)
	}
	for id, n := range seen {
		if n > 1 {
			errs = append(errs, fmt.Errorf("%d entries for %s", n, id))
		}
	}
	for _, pod := range pods {
		ids := byUID[pod.UID]
		delete(byUID, pod.UID)
		wants := want(pod)
		if len(ids) != len(wants) {
			errs = append(errs, fmt.Errorf("pod %s has %d entries, want %d", pod.Name, len(ids), len(wants)))
			continue
		}
		for _, w := range wants {
			if !slices.Contains(ids, w) {
				errs = append(errs, fmt.Errorf("pod %s has no entry for %s", pod.Name, w))
			}
		}
	}
	for uid, ids := range byUID {
		errs = append(errs, fmt.Errorf("%d stray entries for pod UID %s, which no pod has", len(ids), uid))
	}
	if len(errs) > 10 {
		errs = append(errs[:10], fmt.Errorf("and %d more problems", len(errs)-10))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d pods, %d entries: %w", len(pods), len(entries), errors.Join(errs...))
	}
	return nil
}

// memSample is a controller process's memory at one moment.
type memSample struct {
	rss, heapInuse uint64
}

// goHeapInuseMetric is the Go runtime's heap in use, which both controllers export.
const goHeapInuseMetric = "go_memstats_heap_inuse_bytes"

// goGCCountMetric counts the Go runtime's finished garbage collections.
const goGCCountMetric = "go_gc_duration_seconds_count"

// forcedGCPeriod is the longest the Go runtime goes without a garbage collection.
const forcedGCPeriod = 2 * time.Minute

// sampleMemory reads the process's VmRSS and its exported Go heap in use right after a
// garbage collection, so that the heap is what the process keeps, not garbage the collector
// has yet to reclaim, whose amount depends on when the sample falls in the GC cycle.
func sampleMemory(ctx context.Context, p controllerProcess) (memSample, error) {
	if err := awaitGC(ctx, p); err != nil {
		return memSample{}, err
	}
	rss, err := pidRSS(p.pid())
	if err != nil {
		return memSample{}, err
	}
	heap, err := scrapeCounter(ctx, p.metricsEndpoint(), goHeapInuseMetric)
	if err != nil {
		return memSample{}, err
	}
	return memSample{rss: rss, heapInuse: uint64(heap)}, nil
}

// awaitGC returns once the process finished a garbage collection after the call. A
// spire-registrar run with --profiling collects when its heap profile is asked for with gc=1;
// any Go process collects at least every forcedGCPeriod, which is what spire-controller-manager
// is left to.
func awaitGC(ctx context.Context, p controllerProcess) error {
	before, err := scrapeCounter(ctx, p.metricsEndpoint(), goGCCountMetric)
	if err != nil {
		return err
	}
	_, _ = scrape(ctx, strings.TrimSuffix(p.metricsEndpoint(), "/metrics")+"/debug/pprof/heap?gc=1")
	deadline := time.Now().Add(forcedGCPeriod + 30*time.Second)
	for {
		n, err := scrapeCounter(ctx, p.metricsEndpoint(), goGCCountMetric)
		if err != nil {
			return err
		}
		if n > before {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no garbage collection in %v", forcedGCPeriod+30*time.Second)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// idleCost is what a controller costs at rest over a window.
type idleCost struct {
	window time.Duration
	// cpu is the controller process's CPU seconds; lists the ListEntries RPCs SPIRE served;
	// gcs the process's garbage collections, which at rest the runtime forces every 2 minutes.
	cpu, lists, gcs float64
}

// idleAttempts bounds how often a window is measured again because a periodic full resync
// fell into it: with a window shorter than the resync interval, the second one is clear.
const idleAttempts = 3

// measureIdle waits settle, for delayed work to end, then measures the process's CPU and
// SPIRE's ListEntries RPCs over the window. When resyncs counts the controller's periodic
// full resyncs, the window is kept between two of them: one that falls in it is what a
// resync costs, not rest, so the window is measured again right after it.
func (r *run) measureIdle(ctx context.Context, p controllerProcess, resyncs func(context.Context) (float64, error), settle, window time.Duration) (idleCost, error) {
	if err := sleep(ctx, settle); err != nil {
		return idleCost{}, err
	}
	for attempt := 1; ; attempt++ {
		cost, clear, err := r.idleWindow(ctx, p, resyncs, window)
		if err != nil || clear || attempt == idleAttempts {
			return cost, err
		}
		logf("a periodic full resync fell into the idle window; measuring it again")
	}
}

// idleWindow measures one window; clear says no full resync completed in it.
func (r *run) idleWindow(ctx context.Context, p controllerProcess, resyncs func(context.Context) (float64, error), window time.Duration) (cost idleCost, clear bool, err error) {
	countResyncs := func() (float64, error) {
		if resyncs == nil {
			return 0, nil
		}
		return resyncs(ctx)
	}
	resyncs0, err := countResyncs()
	if err != nil {
		return idleCost{}, false, err
	}
	lists0, err := scrapeCounter(ctx, r.spire.MetricsURL(), listEntriesMetric)
	if err != nil {
		return idleCost{}, false, err
	}
	cpu0, err := pidCPU(p.pid())
	if err != nil {
		return idleCost{}, false, err
	}
	gcs0, err := scrapeCounter(ctx, p.metricsEndpoint(), goGCCountMetric)
	if err != nil {
		return idleCost{}, false, err
	}
	start := time.Now()
	if err := sleep(ctx, window); err != nil {
		return idleCost{}, false, err
	}
	lists1, err := scrapeCounter(ctx, r.spire.MetricsURL(), listEntriesMetric)
	if err != nil {
		return idleCost{}, false, err
	}
	cpu1, err := pidCPU(p.pid())
	if err != nil {
		return idleCost{}, false, err
	}
	gcs1, err := scrapeCounter(ctx, p.metricsEndpoint(), goGCCountMetric)
	if err != nil {
		return idleCost{}, false, err
	}
	resyncs1, err := countResyncs()
	if err != nil {
		return idleCost{}, false, err
	}
	// A resync that began in the window and is still listing shows in lists, not in resyncs.
	clear = resyncs1 == resyncs0 && (resyncs == nil || lists1 == lists0)
	return idleCost{window: time.Since(start), cpu: cpu1 - cpu0, lists: lists1 - lists0, gcs: gcs1 - gcs0}, clear, nil
}

// podLatencyTimeout bounds the wait for one pod's entries: spire-controller-manager makes
// them in a full reconcile, which at 100k entries takes a while.
const podLatencyTimeout = 5 * time.Minute

// podLatencies creates count pods one at a time, named prefix-<i>, and returns for each the
// time from its create call until SPIRE served all k of its entries.
func (r *run) podLatencies(ctx context.Context, prefix string, count, k int) ([]time.Duration, error) {
	ds := make([]time.Duration, 0, count)
	for i := range count {
		d, err := r.podEntriesLatency(ctx, fmt.Sprintf("%s-%05d", prefix, i), k, podLatencyTimeout)
		if err != nil {
			return ds, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}
