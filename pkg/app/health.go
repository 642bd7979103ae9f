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

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/serving"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// Health is what the health probes report, with the meaning the official SPIRE Helm chart
// gives them when spire-registrar runs beside spire-server in its pod (docs/metrics.md):
//
//   - liveness fails only when the process cannot recover by itself: the controllers of a
//     leadership that ended have not stopped within termStopTimeout, so that only a restart
//     makes sure they write no more. An unreachable API server or SPIRE server never fails
//     it: the process waits for them and resumes on its own.
//   - readiness fails only while the process starts: before leader election begins, or,
//     without leader election, until every controller completed its first sync. Once ready,
//     the process stays ready through API server and SPIRE outages and through changes of
//     leader, so that the SPIRE server it runs beside stays in its Service. The readiness
//     body says what waits all the same: since when SPIRE has not answered, with the last
//     failure, and how many keys wait for it (see spireReport).
type Health struct {
	mu          sync.Mutex
	controllers []Controller
	// spire is what the SPIRE client knows of SPIRE's reachability; nil when not told.
	spire atomic.Pointer[spire.Reachability]
	// electing is set when leader election is on and the process is past its start.
	electing atomic.Bool
	// phase is where leader election is (a leadershipPhase).
	phase atomic.Int32
	// stoppingSince is when the controllers of the current leadership were told to stop
	// (UnixNano), 0 when none is stopping.
	stoppingSince atomic.Int64
	// stopTimeout bounds stoppingSince; 0 means termStopTimeout.
	stopTimeout time.Duration
}

// Watch makes readiness, without leader election, wait for the first sync of controllers
// (those of NewControllers, for an embedder that runs them itself).
func (h *Health) Watch(controllers []Controller) {
	h.setControllers(controllers)
}

// setControllers sets the controllers whose sync readiness waits for.
func (h *Health) setControllers(cs []Controller) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.controllers = cs
}

// setPhase records where leader election is.
func (h *Health) setPhase(p leadershipPhase) {
	h.phase.Store(int32(p))
}

// Phase is where leader election is: "standing by", "leading", ... (see leadershipPhase); ""
// without leader election.
func (h *Health) Phase() string {
	if !h.electing.Load() {
		return ""
	}
	return leadershipPhase(h.phase.Load()).String()
}

// stopping records that the controllers of the current leadership were told to stop at t;
// the zero time records that they stopped.
func (h *Health) stopping(t time.Time) {
	if t.IsZero() {
		h.stoppingSince.Store(0)
		return
	}
	h.stoppingSince.Store(t.UnixNano())
}

// waiter is implemented by controllers whose keys can wait for SPIRE to answer.
type waiter interface {
	// Waiting is how many keys wait for SPIRE to answer.
	Waiting() int
}

// spireReport says, as lines to add to the readiness body, since when SPIRE has not answered
// and how many keys of which controllers wait for it; "" when SPIRE answers and nothing waits.
func (h *Health) spireReport() string {
	var b strings.Builder
	if r := h.spire.Load(); r != nil {
		if since, err := r.Unreachable(); !since.IsZero() {
			fmt.Fprintf(&b, "\nSPIRE unreachable for %s: %v", time.Since(since).Round(time.Second), err)
		}
	}
	h.mu.Lock()
	controllers := h.controllers
	h.mu.Unlock()
	total := 0
	var each []string
	for _, c := range controllers {
		if w, ok := c.(waiter); ok {
			if n := w.Waiting(); n > 0 {
				total += n
				each = append(each, fmt.Sprintf("%s %d", c.Name(), n))
			}
		}
	}
	if total > 0 {
		fmt.Fprintf(&b, "\n%d keys waiting for SPIRE to answer: %s", total, strings.Join(each, ", "))
	}
	return b.String()
}

// Ready returns why the process is not ready, or nil.
func (h *Health) Ready() error {
	if h.electing.Load() {
		// Standing by, catching up, leading or stopping: none of them is a reason to take the
		// SPIRE server beside this process out of its Service.
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.controllers) == 0 {
		return errors.New("starting: the controllers are not constructed yet")
	}
	for _, c := range h.controllers {
		if !c.HasSynced() {
			return fmt.Errorf("%s has not completed its first sync: it waits for its informers' caches (the API server), then for a full resync with SPIRE", c.Name())
		}
	}
	return nil
}

// Alive returns why the process should be restarted, or nil.
func (h *Health) Alive() error {
	since := h.stoppingSince.Load()
	if since == 0 {
		return nil
	}
	timeout := h.stopTimeout
	if timeout <= 0 {
		timeout = termStopTimeout
	}
	if stuck := time.Since(time.Unix(0, since)); stuck > timeout {
		return fmt.Errorf("the controllers of the leadership that ended %v ago have not stopped (bound %v): only a restart makes sure they write no more", stuck.Round(time.Second), timeout)
	}
	return nil
}

// Handler serves the liveness and readiness endpoints under the given names (the config's
// health.livenessEndpointName and readinessEndpointName, "healthz" and "readyz" by default).
// A probe that fails answers 503 with the reason.
func (h *Health) Handler(livenessName, readinessName string) http.Handler {
	mux := http.NewServeMux()
	probe := func(check func() error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if err := check(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		}
	}
	mux.Handle("/"+livenessName, probe(h.Alive))
	mux.Handle("/"+readinessName, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		report := h.spireReport()
		if err := h.Ready(); err != nil {
			http.Error(w, err.Error()+report, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok" + report))
	}))
	return mux
}

// MetricsHandler serves spire-registrar's Prometheus metrics.
func MetricsHandler() http.Handler {
	return promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{})
}

// defaultServeLimits are what the clients of the health and metrics servers may cost them:
// kubelet probes and Prometheus, GETs without bodies and a few short headers, on a handful of
// connections. The write timeout is longer than Prometheus' default scrape timeout (10 s), so
// a large scrape completes; the idle timeout longer than its default interval (1 m), so a
// scraper keeps its connection.
func defaultServeLimits() serving.Limits {
	return serving.Limits{ReadTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 32 << 10,
		MaxConns: 64, MaxConnsPerAddress: 16, MaxStreams: 16, StreamBuffer: 64 << 10}
}

// Serve listens on addr and serves handler until ctx is done. It returns once listening, with
// the bound address (useful with port 0), or the listen error.
func Serve(ctx context.Context, name, addr string, handler http.Handler) (net.Addr, error) {
	return serve(ctx, name, addr, handler, defaultServeLimits())
}

// serve is Serve under limits.
func serve(ctx context.Context, name, addr string, handler http.Handler, limits serving.Limits) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving %s on %s: %w", name, addr, err)
	}
	go func() {
		if err := serving.Serve(ctx, ln, serving.BusyWhileServing(handler), nil, limits); err != nil {
			klog.FromContext(ctx).Error(err, "Server stopped", "server", name)
		}
	}()
	klog.FromContext(ctx).Info("Serving", "server", name, "address", ln.Addr().String())
	return ln.Addr(), nil
}
