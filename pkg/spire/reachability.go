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

package spire

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// Reachability is what a Client knows of whether SPIRE answers, and since when it has not:
// every call made through the client tells it (probes included), and so does every state of
// the connection that WatchReconnects sees, so that an outage is known within a second even
// when no call is made. It is read for the readiness report and the metrics, never to decide
// whether to call SPIRE: calls are what find out. The zero value knows SPIRE as reachable.
type Reachability struct {
	mu sync.Mutex
	// since is when the outage began, zero while SPIRE answers.
	since time.Time
	// err is the last failure to reach SPIRE during the outage.
	err error
}

// errConnect is the failure a connection that could not connect stands for: gRPC's
// connectivity states carry no error of their own.
var errConnect = status.Error(codes.Unavailable, "cannot connect to the SPIRE server")

// Unreachable returns since when SPIRE has not answered, and the last failure to reach it,
// or a zero time and nil while it answers.
func (r *Reachability) Unreachable() (since time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.since, r.err
}

// observe records the outcome of a call made with ctx: a failure to reach SPIRE begins an
// outage or goes on with it, any answer of SPIRE's, even an error, ends it. A call its caller
// canceled says nothing of SPIRE.
func (r *Reachability) observe(ctx context.Context, err error) {
	if r == nil {
		return
	}
	switch {
	case err == nil:
		r.set(nil)
	case errors.Is(ctx.Err(), context.Canceled):
	case Unreachable(err):
		r.set(err)
	default:
		r.set(nil)
	}
}

// connection records a state of the connection: one that failed to connect begins an outage
// (a failed call's error, more telling, is kept if there is one); one ready again, past the
// handshake with the server, ends it.
func (r *Reachability) connection(state connectivity.State) {
	switch state {
	case connectivity.Ready:
		r.set(nil)
	case connectivity.TransientFailure:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.since.IsZero() {
			r.since, r.err = time.Now(), errConnect
		}
	}
}

// set ends the outage when err is nil, else begins it or records its last failure.
func (r *Reachability) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.since, r.err = time.Time{}, nil
	case r.since.IsZero():
		r.since, r.err = time.Now(), err
	default:
		r.err = err
	}
}

// Prober is implemented by entry clients that can check cheaply whether SPIRE answers.
// Decorators implement it by passing it on (see Probe).
type Prober interface {
	// Probe returns nil once SPIRE answers a call, whatever the answer's content.
	Probe(ctx context.Context) error
}

// Probe checks whether SPIRE answers through c: with Prober's cheap call where c has it,
// else with a full listing.
func Probe(ctx context.Context, c EntryClient) error {
	if p, ok := c.(Prober); ok {
		return p.Probe(ctx)
	}
	_, err := c.ListEntries(ctx)
	return err
}

// Unreachable reports whether err is nothing but failures to reach SPIRE: every error it
// joins or aggregates carries UNAVAILABLE or DEADLINE_EXCEEDED. Such a failure says nothing
// about what SPIRE would answer, so the write is worth retrying as soon as SPIRE is back.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var joined interface{ Unwrap() []error } // errors.Join, fmt.Errorf with several %w
	if errors.As(err, &joined) {
		return allUnreachable(joined.Unwrap())
	}
	var aggregate interface{ Errors() []error } // k8s.io/apimachinery's Aggregate
	if errors.As(err, &aggregate) {
		return allUnreachable(aggregate.Errors())
	}
	// The items of a batch call that failed carry the call's error in an
	// UnknownOutcomeError, whose own code is Unknown: what says whether SPIRE was reached is
	// the call's error inside it.
	var unknown *UnknownOutcomeError
	if errors.As(err, &unknown) {
		return Unreachable(unknown.Err)
	}
	var withStatus interface{ GRPCStatus() *status.Status }
	if errors.As(err, &withStatus) {
		code := withStatus.GRPCStatus().Code()
		return code == codes.Unavailable || code == codes.DeadlineExceeded
	}
	// A deadline of the caller's that ended the call before gRPC saw it.
	return errors.Is(err, context.DeadlineExceeded)
}

func allUnreachable(errs []error) bool {
	if len(errs) == 0 {
		return false
	}
	for _, err := range errs {
		if !Unreachable(err) {
			return false
		}
	}
	return true
}

// Probe passes the probe on to the inner client.
func (c *BatchingClient) Probe(ctx context.Context) error {
	return Probe(ctx, c.inner)
}

// Probe passes the probe on: a dry run reads as a run does.
func (d *dryRun) Probe(ctx context.Context) error {
	return Probe(ctx, d.API)
}
