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

package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// TestUnreachableKeysAreParkedUntilSPIREAnswers: a key that fails only because SPIRE cannot
// be reached is neither retried with backoff nor dropped after maxRetries, however long the
// outage; it is queued again once a probe finds SPIRE answering. A refusal is not parked.
func TestUnreachableKeysAreParkedUntilSPIREAnswers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := instantQueue()
	defer queue.ShutDown()
	parking, probes := gatedParking(ctx, "parked", queue)
	parked := metrics.ParkedKeys.WithLabelValues("parked")

	down := fmt.Errorf("syncing: %w", errors.Join(status.Error(codes.Unavailable, "connection refused"),
		fmt.Errorf("deleting: %w", status.Error(codes.DeadlineExceeded, "deadline exceeded"))))
	queue.Add("pod-a")
	processNext(ctx, "test-controller", "pod", queue, parking, func(context.Context, string) error { return down })
	if queue.Len() != 0 || queue.NumRequeues("pod-a") != 0 {
		t.Fatalf("an unreachable key stayed in the queue (len %d, requeues %d), want it parked", queue.Len(), queue.NumRequeues("pod-a"))
	}
	// Far more probe failures than maxRetries: the key is still held, and counted as waiting
	// though the queue's depth is 0.
	for range 2 * maxRetries {
		(<-probes) <- status.Error(codes.Unavailable, "still down")
	}
	if queue.Len() != 0 {
		t.Fatal("the key was queued while SPIRE was still unreachable")
	}
	if n, gauge := parking.Len(), value(parked); n != 1 || gauge != 1 {
		t.Errorf("Len() = %d and spire_registrar_parked_keys = %v while the key waits, want 1 and 1", n, gauge)
	}
	(<-probes) <- nil
	key, _ := queue.Get()
	if key != "pod-a" {
		t.Fatalf("queued %q after SPIRE answered, want pod-a", key)
	}
	queue.Done(key)
	if n, gauge := parking.Len(), value(parked); n != 0 || gauge != 0 {
		t.Errorf("Len() = %d and spire_registrar_parked_keys = %v once the key is queued again, want 0 and 0", n, gauge)
	}

	refused := fmt.Errorf("syncing: %w", errors.Join(status.Error(codes.Unavailable, "down"),
		status.Error(codes.InvalidArgument, "no bundle for partner.org")))
	queue.Add("pod-b")
	processNext(ctx, "test-controller", "pod", queue, parking, func(context.Context, string) error { return refused })
	if queue.NumRequeues("pod-b") != 1 {
		t.Errorf("a key SPIRE refused has %d requeues, want 1: it is retried with backoff, not parked", queue.NumRequeues("pod-b"))
	}
	select {
	case answer := <-probes:
		close(answer)
		t.Error("a refused key started a probe")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestWaitForProbeKeysAreParked: a sync error that wraps ErrWaitForProbe parks the key even
// though nothing in it says SPIRE is unreachable (the pod certificate controller's "no usable
// CA yet"): it is not retried with backoff, and is queued again once the probe succeeds.
func TestWaitForProbeKeysAreParked(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := instantQueue()
	defer queue.ShutDown()
	parking, probes := gatedParking(ctx, "waiting", queue)

	waiting := fmt.Errorf("%w: no usable CA: the CA expires too soon", ErrWaitForProbe)
	queue.Add("request-a")
	processNext(ctx, "test-controller", "podCertificateRequest", queue, parking, func(context.Context, string) error { return waiting })
	if queue.Len() != 0 || queue.NumRequeues("request-a") != 0 {
		t.Fatalf("a key waiting for the probe stayed in the queue (len %d, requeues %d), want it parked", queue.Len(), queue.NumRequeues("request-a"))
	}
	(<-probes) <- errors.New("still no CA")
	if queue.Len() != 0 {
		t.Fatal("the key was queued while the probe still failed")
	}
	(<-probes) <- nil
	if key, _ := queue.Get(); key != "request-a" {
		t.Fatalf("queued %q after the probe passed, want request-a", key)
	}
}

// TestKeysParkedTogetherCostOneProbe: keys parked during one outage are queued again after
// one successful probe, and no probe follows for keys already queued.
func TestKeysParkedTogetherCostOneProbe(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := instantQueue()
	defer queue.ShutDown()
	parking, probes := gatedParking(ctx, "together", queue)

	down := status.Error(codes.Unavailable, "connection refused")
	queue.Add("pod-a")
	processNext(ctx, "test-controller", "pod", queue, parking, func(context.Context, string) error { return down })
	answer := <-probes // the round has started; the next key parks during it
	queue.Add("pod-b")
	processNext(ctx, "test-controller", "pod", queue, parking, func(context.Context, string) error { return down })
	answer <- nil
	for range 2 {
		key, _ := queue.Get()
		queue.Done(key)
	}
	select {
	case answer := <-probes:
		close(answer)
		t.Error("a probe followed with no key parked")
	case <-time.After(100 * time.Millisecond):
	}
}

// gatedParking runs a Parking of queue whose probes wait for the test: each probe sends a
// channel on probes and returns what the test answers on it.
func gatedParking(ctx context.Context, name string, queue workqueue.TypedRateLimitingInterface[string]) (*Parking[string], chan chan error) {
	probes := make(chan chan error)
	parking := NewParking(name, queue, func(context.Context) error {
		answer := make(chan error)
		probes <- answer
		return <-answer
	})
	parking.baseDelay, parking.maxDelay = time.Millisecond, time.Millisecond
	go parking.Run(ctx)
	return parking, probes
}
