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
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// rolloutDeployment is the name of the Deployment a rollout run rolls out.
	rolloutDeployment = "app"
	// templateAnnotation is the pod template annotation the rollout changes.
	templateAnnotation = "bench.spire-registrar.io/template"
	// settleTime lets delayed work (batched status writes, the last syncs) finish before a
	// measurement starts, and counts the writes that come after one ends.
	settleTime = 3 * time.Second
	// pollConcurrency is how many pods' entries are asked for at once.
	pollConcurrency = 4
	// minCountInterval spaces the counts of every entry at the end of a rollout, each of
	// which costs SPIRE as much as a listing.
	minCountInterval = 50 * time.Millisecond
)

// The rollout strategy users most often leave as it is: Kubernetes' defaults.
var (
	rolloutMaxSurge       = intstr.FromString("25%")
	rolloutMaxUnavailable = intstr.FromString("25%")
)

// rolloutOptions configure one rollout measurement.
type rolloutOptions struct {
	n int
	// poll is the pause between the listings of SPIRE that see entries appear.
	poll time.Duration
	// flapsPerSecond is how often a Running pod's Ready condition is set False and back to
	// True during the rollout; 0 leaves status churn to kwok alone.
	flapsPerSecond float64
	timeout        time.Duration
}

// rolloutResult is what one rollout measured.
type rolloutResult struct {
	datastore string
	n         int
	// initial runs from the Deployment's create until SPIRE held an entry for every pod.
	initial time.Duration
	// converged runs from the template change until SPIRE held exactly the entries of the
	// new template's n pods.
	converged time.Duration
	// replaced counts the old pods that were gone at convergence.
	replaced int
	// latencies are, per new pod, from the bench seeing it scheduled to SPIRE serving its
	// entry; unmeasured counts the new pods that lack either time.
	latencies  []time.Duration
	unmeasured int
	// writes are SPIRE's entry writes from the template change to convergence; late are
	// those in the settleTime after it.
	writes, late entryWrites
	flaps        int
	// rounds are the durations of the rounds of SPIRE queries that saw entries appear: an
	// entry's first-seen time is late by up to one.
	rounds []time.Duration
	cpu    cpuSample
	// postgresCPU is what the PostgreSQL cluster spent during the rollout, -1 on sqlite.
	postgresCPU float64
}

// benchRollout creates a Deployment of o.n replicas in a fresh run, waits until every pod has
// its entry, then changes its template and measures until SPIRE holds exactly the new pods'
// entries, while kwok moves pods through their stages and, if asked, Ready conditions flap.
func benchRollout(ctx context.Context, cl *cluster, spec runSpec, o rolloutOptions) (res rolloutResult, err error) {
	res.n = o.n
	r, err := cl.startRunSpec(ctx, spec)
	if err != nil {
		return res, err
	}
	defer func() {
		logf("%s: stopping the controller and SPIRE, deleting the Deployment and its pods", spec.name)
		cleanupCtx := context.WithoutCancel(ctx)
		if err := cl.kubeClient.AppsV1().Deployments(spec.name).Delete(cleanupCtx, rolloutDeployment, metav1.DeleteOptions{}); err != nil {
			logf("deleting Deployment %s/%s: %v", spec.name, rolloutDeployment, err)
		}
		r.stop(cleanupCtx)
		if err := cl.kubeClient.CoreV1().Namespaces().Delete(cleanupCtx, spec.name, metav1.DeleteOptions{}); err != nil {
			logf("deleting namespace %s: %v", spec.name, err)
		}
	}()

	tracker := newPodTracker()
	factory := informers.NewSharedInformerFactoryWithOptions(cl.kubeClient, 0, informers.WithNamespace(spec.name))
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(trackerHandler(tracker)); err != nil {
		return res, fmt.Errorf("watch pods: %w", err)
	}
	informerCtx, stopInformer := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	defer factory.Shutdown()
	defer stopInformer() // Shutdown waits for the informer, which runs until its context ends.
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced) {
		return res, fmt.Errorf("sync the pod informer: %w", ctx.Err())
	}

	start := time.Now()
	if _, err := cl.kubeClient.AppsV1().Deployments(spec.name).Create(ctx, rolloutDeploymentObject(spec.name, o.n), metav1.CreateOptions{}); err != nil {
		return res, fmt.Errorf("create Deployment: %w", err)
	}
	logf("%s: Deployment of %d replicas created; waiting for their entries", spec.name, o.n)
	done, err := r.waitForCount(ctx, o.n, start, o.timeout)
	if err != nil {
		return res, fmt.Errorf("first rollout: %w", err)
	}
	res.initial = done.Sub(start)
	if err := waitDeploymentComplete(ctx, cl, spec.name, o.n, o.timeout); err != nil {
		return res, err
	}
	if err := sleep(ctx, settleTime); err != nil {
		return res, err
	}
	if err := r.verify(ctx); err != nil {
		return res, fmt.Errorf("before the rollout: %w", err)
	}
	logf("%s: %d pods Running with their entries after %v; rolling out a new template", spec.name, o.n, time.Since(start).Round(time.Millisecond))

	tracker.startRollout()
	writesBefore, err := scrapeEntryWrites(ctx, r.spire.MetricsURL())
	if err != nil {
		return res, err
	}
	cpuBefore := sampleCPU(r.spire.Dir(), cl.kube.Dir())
	postgresCPU := func() float64 { return -1 }
	if spec.postgres != nil {
		// The postmaster's command line names its port; its children serve the connections.
		match := "\x00-p\x00" + strconv.Itoa(spec.postgres.Port()) + "\x00"
		postgresCPU = func() float64 { return procTreeCPU(match) }
	}
	postgresBefore := postgresCPU()
	measureCtx, endMeasure := context.WithCancel(ctx)
	defer endMeasure()
	converged := make(chan time.Time, 1)
	type pollResult struct {
		rounds []time.Duration
		err    error
	}
	polled := make(chan pollResult, 1)
	go func() {
		rounds, err := r.pollEntries(measureCtx, tracker, o.n, o.poll, converged)
		polled <- pollResult{rounds, err}
	}()
	flaps := make(chan int, 1)
	go func() { flaps <- flapReady(measureCtx, cl, spec.name, tracker, o.flapsPerSecond) }()

	start = time.Now()
	if err := changeTemplate(ctx, cl, spec.name); err != nil {
		return res, err
	}
	timeout := time.NewTimer(o.timeout)
	defer timeout.Stop()
	select {
	case at := <-converged:
		res.converged = at.Sub(start)
	case p := <-polled:
		if p.err == nil {
			p.err = ctx.Err()
		}
		return res, fmt.Errorf("poll SPIRE: %w", p.err)
	case <-timeout.C:
		return res, fmt.Errorf("rollout not converged after %v: %d old pods replaced", o.timeout, tracker.replaced())
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.cpu = sampleCPU(r.spire.Dir(), cl.kube.Dir()).sub(cpuBefore)
	if after := postgresCPU(); after >= 0 && postgresBefore >= 0 {
		res.postgresCPU = after - postgresBefore
	} else {
		res.postgresCPU = -1
	}
	p := <-polled // It returned right after sending the convergence time.
	res.rounds = p.rounds
	writesAt, err := scrapeEntryWrites(ctx, r.spire.MetricsURL())
	if err != nil {
		return res, err
	}
	res.writes = writesAt.sub(writesBefore)
	endMeasure()
	res.flaps = <-flaps
	res.latencies, res.unmeasured = tracker.latencies()
	res.replaced = tracker.replaced()
	logf("%s: SPIRE holds exactly the new pods' entries %v after the template change", spec.name, res.converged.Round(time.Millisecond))

	if err := waitDeploymentComplete(ctx, cl, spec.name, o.n, o.timeout); err != nil {
		return res, err
	}
	if err := sleep(ctx, settleTime); err != nil {
		return res, err
	}
	writesAfter, err := scrapeEntryWrites(ctx, r.spire.MetricsURL())
	if err != nil {
		return res, err
	}
	res.late = writesAfter.sub(writesAt)
	if err := r.verify(ctx); err != nil {
		return res, fmt.Errorf("after the rollout: %w", err)
	}
	return res, nil
}

// trackerHandler feeds pod events to the tracker with the time they arrived.
func trackerHandler(t *podTracker) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				t.observe(pod, time.Now())
			}
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				t.observe(pod, time.Now())
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				t.forget(pod.UID)
			}
		},
	}
}

// rolloutDeploymentObject is a Deployment of n replicas for kwok's nodes, with the default
// rolling update strategy spelled out.
func rolloutDeploymentObject(namespace string, n int) *appsv1.Deployment {
	labels := map[string]string{"app": rolloutDeployment}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: rolloutDeployment},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(n)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: &rolloutMaxSurge, MaxUnavailable: &rolloutMaxUnavailable,
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{templateAnnotation: "1"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "main", Image: realcluster.PlaceholderImage}},
				},
			},
		},
	}
	realcluster.KwokPodSpec(&d.Spec.Template.Spec)
	return d
}

// changeTemplate changes the Deployment's pod template, which starts a rollout.
func changeTemplate(ctx context.Context, cl *cluster, namespace string) error {
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:"2"}}}}}`, templateAnnotation)
	if _, err := cl.kubeClient.AppsV1().Deployments(namespace).Patch(ctx, rolloutDeployment, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("change the Deployment's template: %w", err)
	}
	return nil
}

// waitDeploymentComplete waits until the Deployment has rolled out its latest template to n
// available pods and no other pod of it is left.
func waitDeploymentComplete(ctx context.Context, cl *cluster, namespace string, n int, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := cl.kubeClient.AppsV1().Deployments(namespace).Get(ctx, rolloutDeployment, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		s := d.Status
		pods, err := cl.kubeClient.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d pods; status: %d replicas, %d updated, %d available", len(pods.Items), s.Replicas, s.UpdatedReplicas, s.AvailableReplicas)
		want := int32(n)
		return s.ObservedGeneration == d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
			s.AvailableReplicas == want && len(pods.Items) == n, nil
	})
	if err != nil {
		return fmt.Errorf("wait for Deployment %s/%s to complete (last: %s): %w", namespace, rolloutDeployment, last, err)
	}
	return nil
}

// pollEntries looks for the entries of the tracker's pending pods in SPIRE, pod by pod as the
// converge mode's steady state does, with pause between rounds, and, once every new pod's
// entry has been seen, counts SPIRE's entries until they are exactly the new template's n; it
// then sends the time that count returned on converged. It returns how long each round that
// queried SPIRE took: an entry's first-seen time is late by up to one round.
//
// Queries by one pod's selector cost SPIRE little; listing every entry would cost it about
// as much as the writes being measured once there are thousands.
func (r *run) pollEntries(ctx context.Context, t *podTracker, n int, pause time.Duration, converged chan<- time.Time) ([]time.Duration, error) {
	var rounds []time.Duration
	var lastCount time.Time
	for {
		start := time.Now()
		if pending := t.pending(); len(pending) > 0 {
			if err := r.lookForEntries(ctx, t, pending); err != nil {
				if ctx.Err() != nil {
					return rounds, nil
				}
				return rounds, err
			}
			rounds = append(rounds, time.Since(start))
		} else if t.allNewSeen(n) && time.Since(lastCount) >= minCountInterval {
			lastCount = time.Now()
			count, err := r.countEntries(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return rounds, nil
				}
				return rounds, err
			}
			if count == n {
				converged <- time.Now()
				return rounds, nil
			}
		}
		if err := sleep(ctx, pause); err != nil {
			return rounds, nil
		}
	}
}

// lookForEntries asks SPIRE for each pod's entries, pollConcurrency at a time, and records
// those it serves. It returns the first error.
func (r *run) lookForEntries(ctx context.Context, t *podTracker, uids []types.UID) error {
	var next atomic.Int64
	errs := make([]error, pollConcurrency)
	var wg sync.WaitGroup
	for w := range min(pollConcurrency, len(uids)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(uids) {
					return
				}
				n, err := r.entriesForPod(ctx, string(uids[i]))
				if err != nil {
					errs[w] = err
					return
				}
				if n > 0 {
					t.sawEntry(uids[i], time.Now())
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// flapReady sets the Ready condition of a random Running pod to False and back to True,
// perSecond times a second, until ctx ends, and returns how many pods it flapped. kwok only
// readies Pending pods, so it leaves these flaps alone. Failed flaps (the pod went, or
// changed under us) are not counted.
func flapReady(ctx context.Context, cl *cluster, namespace string, t *podTracker, perSecond float64) int {
	if perSecond <= 0 {
		return 0
	}
	ticker := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
	defer ticker.Stop()
	flapped := 0
	for {
		select {
		case <-ctx.Done():
			return flapped
		case <-ticker.C:
		}
		names := t.runningPods()
		if len(names) == 0 {
			continue
		}
		name := names[rand.IntN(len(names))]
		ok := true
		for i, status := range []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue} {
			writeCtx := ctx
			if i > 0 {
				// A pod must not stay unready when the measurement ends between the two.
				writeCtx = context.WithoutCancel(ctx)
			}
			_, err := realcluster.UpdatePodStatus(writeCtx, cl.kubeClient, namespace, name, func(s *corev1.PodStatus) {
				for i := range s.Conditions {
					if s.Conditions[i].Type == corev1.PodReady || s.Conditions[i].Type == corev1.ContainersReady {
						s.Conditions[i].Status = status
						s.Conditions[i].LastTransitionTime = metav1.Now()
					}
				}
			})
			ok = ok && err == nil
		}
		if ok {
			flapped++
		}
	}
}
