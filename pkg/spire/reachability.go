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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
