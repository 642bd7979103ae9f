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
	"fmt"
	"time"
)

// DeleteResult is the outcome of deleting one item.
type DeleteResult struct {
	// ID is the entry ID or trust domain name as given by the caller.
	ID string
	// Err is nil when the item was deleted, an *ItemError otherwise
	// (IsNotFound reports an item that was already gone).
	Err error
}

// listAll follows next-page tokens until the server returns an empty one.
// On any error it returns no items, because a caller that diffed against a
// partial list would delete or recreate whatever it had not seen yet.
// rpc names the call in logs, op in errors.
func listAll[T any](ctx context.Context, rpc, op string, fetch func(ctx context.Context, token string) ([]T, string, error)) ([]T, error) {
	var all []T
	if err := eachPage(ctx, rpc, op, fetch, func(items []T) error {
		all = append(all, items...)
		return nil
	}); err != nil {
		return nil, err
	}
	return all, nil
}

// eachPage follows next-page tokens as listAll does, handing each page to use as it
// arrives; an error of fetch or of use ends it. The caller must drop what it kept of the
// pages before an error, for the reason listAll returns no items.
func eachPage[T any](ctx context.Context, rpc, op string, fetch func(ctx context.Context, token string) ([]T, string, error), use func([]T) error) error {
	token := ""
	for page := 1; ; page++ {
		start := time.Now()
		items, next, err := fetch(ctx, token)
		logCall(ctx, rpc, start, err, "page", page, "items", len(items))
		if err != nil {
			return fmt.Errorf("%s: page %d: %w", op, page, err)
		}
		if err := use(items); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		// A server handing back the token it was given would loop forever.
		if next == token {
			return fmt.Errorf("%s: page %d: server repeated page token %q", op, page, next)
		}
		token = next
	}
}

// inBatches sends items with send in consecutive batches of at most size items, and turns
// each item and the server's result for it into the caller's result. If a call fails it stops
// and returns the results of the batches that completed before it (always a prefix of items,
// len(results) items long) together with the error; the items of the failed batch and every
// later one have no result and an unknown outcome, since the server may have applied the
// failed batch before the error reached us.
func inBatches[In, R, Out any](ctx context.Context, rpc, op string, size int, items []In,
	send func(ctx context.Context, batch []In) ([]R, error), result func(item In, r R) Out) ([]Out, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]Out, 0, len(items))
	for lo := 0; lo < len(items); lo += size {
		hi := min(lo+size, len(items))
		start := time.Now()
		res, err := send(ctx, items[lo:hi])
		if err == nil {
			err = checkCount(len(res), hi-lo)
		}
		logCall(ctx, rpc, start, err, "items", hi-lo, "offset", lo, "total", len(items))
		if err != nil {
			return out, fmt.Errorf("%s: items %d-%d of %d: %w", op, lo, hi-1, len(items), err)
		}
		for i, r := range res {
			out = append(out, result(items[lo+i], r))
		}
	}
	return out, nil
}

// noNil rejects nil items up front: protobuf cannot marshal them and the whole batch would
// fail with an opaque error. what names an item in the error.
func noNil[T comparable](items []T, what string) error {
	var zero T
	for i, it := range items {
		if it == zero {
			return fmt.Errorf("%s %d is nil", what, i)
		}
	}
	return nil
}

// checkCount guards against a server that breaks the one-result-per-item
// contract: results could not be matched to items.
func checkCount(got, want int) error {
	if got != want {
		return fmt.Errorf("server returned %d results for %d items", got, want)
	}
	return nil
}
