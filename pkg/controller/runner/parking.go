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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
)

// How often a Parking probes SPIRE while it holds keys: half a second after the first
// failure, then every parkingMaxDelay, so that a change made during an outage reaches SPIRE
// within a second of its return while the outage itself costs one cheap call a second.
// parkingBaseDelay also spaces two rounds of requeues, should SPIRE answer probes but not
// writes.
const (
	parkingBaseDelay = 500 * time.Millisecond
	parkingMaxDelay  = time.Second
)

// ErrWaitForProbe marks a sync that cannot succeed before the parking's probe does, whatever
// else its error says: such a key is parked too.
var ErrWaitForProbe = errors.New("waiting for the parking's probe to succeed")

// Parking holds the keys of one queue whose sync failed only because SPIRE could not be
// reached. The queue's own backoff grows to minutes and drops a key after maxRetries, leaving
// it to the next full resync; a parked key instead waits, without retries, for one probe of
// SPIRE to succeed, and is then queued again with every other parked key.
//
// A parked key is in neither the queue nor its backoff, so the queue's depth and retries do
// not count it: spire_registrar_parked_keys does, under the queue's name, and Len says it.
type Parking[T comparable] struct {
	queue workqueue.TypedRateLimitingInterface[T]
	probe func(context.Context) error
	// parked is the spire_registrar_parked_keys series of the queue.
	parked prometheus.Gauge
	// baseDelay and maxDelay space the probes; tests shorten them.
	baseDelay, maxDelay time.Duration

	mu   sync.Mutex
	keys map[T]struct{}
	// wake holds a token while keys wait for a probe round.
	wake chan struct{}
}

// NewParking returns a parking for queue's keys, probing SPIRE with probe. name is the
// queue's name (the one NewQueue was given), under which the parked keys are counted.
func NewParking[T comparable](name string, queue workqueue.TypedRateLimitingInterface[T], probe func(context.Context) error) *Parking[T] {
	p := &Parking[T]{queue: queue, probe: probe, parked: metrics.ParkedKeys.WithLabelValues(name),
		baseDelay: parkingBaseDelay, maxDelay: parkingMaxDelay, keys: map[T]struct{}{}, wake: make(chan struct{}, 1)}
	p.parked.Set(0)
	return p
}

// Len is how many keys wait for the probe to succeed.
func (p *Parking[T]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}

// park holds key until SPIRE answers. The key leaves the queue's backoff.
func (p *Parking[T]) park(key T) {
	p.queue.Forget(key)
	p.mu.Lock()
	p.keys[key] = struct{}{}
	p.parked.Set(float64(len(p.keys)))
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run probes SPIRE while keys are parked and queues them again once it answers, until ctx
// ends. Run it as one of a controller's Workers.
func (p *Parking[T]) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		for delay := p.baseDelay; ; delay = min(2*delay, p.maxDelay) {
			if !sleep(ctx, delay) {
				return
			}
			err := p.probe(ctx)
			if err == nil {
				break
			}
			logger.V(4).Info("SPIRE is still unreachable; keys stay parked", "err", err)
		}
		p.mu.Lock()
		keys := p.keys
		p.keys = map[T]struct{}{}
		p.parked.Set(0)
		// A token left by the keys just taken would start a round, and a probe, for none: a
		// key parked from now on leaves a token of its own.
		select {
		case <-p.wake:
		default:
		}
		p.mu.Unlock()
		logger.V(2).Info("SPIRE answers again; retrying the keys that could not reach it", "keys", len(keys))
		for k := range keys {
			p.queue.Add(k)
		}
	}
}

// sleep waits for d, or returns false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
