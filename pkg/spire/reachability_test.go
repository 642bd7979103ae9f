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
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

func TestUnreachable(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection refused")
	deadline := status.Error(codes.DeadlineExceeded, "deadline exceeded")
	refused := &ItemError{Op: "create entry", Code: codes.InvalidArgument, Message: "no bundle"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unavailable", unavailable, true},
		{"deadline", deadline, true},
		{"caller's deadline", context.DeadlineExceeded, true},
		{"canceled", context.Canceled, false},
		{"refused", refused, false},
		{"item unavailable", &ItemError{Code: codes.Unavailable}, true},
		{"wrapped aggregate of unreachable", fmt.Errorf("sync: %w", utilerrors.NewAggregate([]error{
			fmt.Errorf("creating: %w", unavailable), fmt.Errorf("deleting: %w", deadline)})), true},
		{"aggregate with a refusal", utilerrors.NewAggregate([]error{unavailable, refused}), false},
		{"joined", errors.Join(unavailable, fmt.Errorf("x: %w", deadline)), true},
		{"joined with plain error", errors.Join(unavailable, errors.New("status update conflict")), false},
		{"plain", errors.New("boom"), false},
		// What the reconciler gets for each item of a batch call that could not reach SPIRE
		// (CompleteEntryResults): a call failed as a whole, so the item's outcome is unknown.
		{"item of a batch call that could not reach SPIRE", fmt.Errorf("creating entry spiffe://td/a: %w",
			CompleteEntryResults(nil, 1, fmt.Errorf("create entries: items 0-0 of 1: %w", unavailable))[0].Err), true},
		{"item of a batch call past its deadline", CompleteDeleteResults(nil, []string{"id"}, deadline)[0].Err, true},
		{"item of a batch call SPIRE refused", CompleteFederationResults(nil, 1, status.Error(codes.PermissionDenied, "denied"))[0].Err, false},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestReachability: a failure to reach SPIRE, of a call or of the connection, begins an
// outage, later ones keep its start, the most telling failure is kept, and any answer of
// SPIRE's, even a refusal, or a connection ready again ends it; a call its caller canceled
// changes nothing.
func TestReachability(t *testing.T) {
	ctx := context.Background()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	unavailable := status.Error(codes.Unavailable, "connection refused")
	deadline := status.Error(codes.DeadlineExceeded, "no answer within 30s")
	var r Reachability
	expect := func(what string, wantSince time.Time, wantErr error) {
		t.Helper()
		since, err := r.Unreachable()
		if !since.Equal(wantSince) || !errors.Is(err, wantErr) {
			t.Errorf("%s: unreachable since %v with %v, want since %v with %v", what, since, err, wantSince, wantErr)
		}
	}
	expect("at first", time.Time{}, nil)
	r.observe(ctx, nil)
	expect("after an answer", time.Time{}, nil)

	before := time.Now()
	r.observe(ctx, fmt.Errorf("create entries: %w", unavailable))
	since, _ := r.Unreachable()
	if since.Before(before) || since.After(time.Now()) {
		t.Fatalf("outage began at %v, want when the call failed", since)
	}
	r.observe(ctx, deadline)
	expect("after a second failure", since, deadline)
	r.observe(canceled, status.Error(codes.Canceled, "context canceled"))
	expect("after a call its caller canceled", since, deadline)
	r.connection(connectivity.TransientFailure)
	expect("after a failed connection", since, deadline)
	r.connection(connectivity.Connecting)
	expect("while connecting", since, deadline)
	r.observe(ctx, status.Error(codes.PermissionDenied, "denied"))
	expect("after a refusal", time.Time{}, nil)

	r.connection(connectivity.TransientFailure)
	since, err := r.Unreachable()
	if since.IsZero() || !errors.Is(err, errConnect) {
		t.Errorf("after a failed connection: unreachable since %v with %v, want since now with %v", since, err, errConnect)
	}
	r.observe(ctx, unavailable)
	expect("after a failed call", since, unavailable)
	r.connection(connectivity.Ready)
	expect("once the connection is ready", time.Time{}, nil)

	var nilReach *Reachability
	nilReach.observe(ctx, unavailable) // a boundedConn without one: no panic
}
