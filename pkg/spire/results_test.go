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
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCompleteResults(t *testing.T) {
	callErr := status.Error(codes.NotFound, "batch lost")
	itemErr := &ItemError{Op: "delete entry", Key: "a", Code: codes.NotFound, Message: "gone"}

	t.Run("a failed call's missing items carry its error but not its code", func(t *testing.T) {
		got := CompleteDeleteResults([]DeleteResult{{ID: "a", Err: itemErr}}, []string{"a", "b", "c"}, callErr)
		if len(got) != 3 {
			t.Fatalf("got %d results, want 3", len(got))
		}
		if !errors.Is(got[0].Err, itemErr) {
			t.Errorf("result 0 = %v, want the item's own error", got[0].Err)
		}
		for i, id := range []string{"b", "c"} {
			r := got[i+1]
			if r.ID != id || !errors.Is(r.Err, callErr) || r.Err.Error() != callErr.Error() {
				t.Errorf("result %d = %+v, want ID %q and the call's error", i+1, r, id)
			}
			if IsNotFound(r.Err) {
				t.Errorf("result %d reads as NOT_FOUND: the call's code was taken for the item's", i+1)
			}
		}
	})

	t.Run("a short answer without an error still fails the missing items", func(t *testing.T) {
		got := CompleteEntryResults(nil, 2, nil)
		for i, r := range got {
			if r.Err == nil || status.Code(r.Err) != codes.Unknown {
				t.Errorf("result %d = %+v, want an error of unknown outcome", i, r)
			}
		}
		if len(got) != 2 {
			t.Errorf("got %d results, want 2", len(got))
		}
	})

	t.Run("complete and longer answers are cut to the request", func(t *testing.T) {
		in := []FederationResult{{}, {}, {}}
		if got := CompleteFederationResults(in, 2, callErr); len(got) != 2 || got[0].Err != nil || got[1].Err != nil {
			t.Errorf("got %+v, want the first 2 results unchanged", got)
		}
	})
}
