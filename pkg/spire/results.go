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
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errNoResult stands for the call's error when a call returned fewer results than items
// without one.
var errNoResult = errors.New("server returned no result for the item")

// UnknownOutcomeError is the result of an item that a failed call returned no result for: the
// call failed in or before the item's batch, which the server may or may not have applied.
// It reads as the call's error and wraps it, but its gRPC code is Unknown, so that a
// call-level code is never taken for the item's own (NOT_FOUND, ALREADY_EXISTS).
type UnknownOutcomeError struct {
	// Err is the call's error.
	Err error
}

// Error implements error.
func (e *UnknownOutcomeError) Error() string { return e.Err.Error() }

// Unwrap returns the call's error.
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// GRPCStatus reports codes.Unknown: the item's outcome is not known.
func (e *UnknownOutcomeError) GRPCStatus() *status.Status {
	return status.New(codes.Unknown, e.Err.Error())
}

// CompleteEntryResults returns the results of a create or update of n entries as n results:
// a call that fails part way returns the results of the batches before the failure only, and
// each item after them gets an UnknownOutcomeError of err. Results beyond n are dropped.
func CompleteEntryResults(results []EntryResult, n int, err error) []EntryResult {
	return complete(results, n, err, func(_ int, err error) EntryResult { return EntryResult{Err: err} })
}

// CompleteFederationResults is CompleteEntryResults for federation relationships.
func CompleteFederationResults(results []FederationResult, n int, err error) []FederationResult {
	return complete(results, n, err, func(_ int, err error) FederationResult { return FederationResult{Err: err} })
}

// CompleteDeleteResults is CompleteEntryResults for a delete of ids, which also names each
// added result's ID.
func CompleteDeleteResults(results []DeleteResult, ids []string, err error) []DeleteResult {
	return complete(results, len(ids), err, func(i int, err error) DeleteResult { return DeleteResult{ID: ids[i], Err: err} })
}

func complete[R any](results []R, n int, err error, missing func(i int, err error) R) []R {
	if len(results) >= n {
		return results[:n]
	}
	if err == nil {
		err = errNoResult
	}
	out := make([]R, n)
	copy(out, results)
	for i := len(results); i < n; i++ {
		out[i] = missing(i, &UnknownOutcomeError{Err: err})
	}
	return out
}
