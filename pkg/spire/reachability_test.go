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

	"google.golang.org/grpc/codes"
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
