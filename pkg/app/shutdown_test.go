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
	"testing"
	"time"
)

func TestRunWithShutdownTimeout(t *testing.T) {
	failed := errors.New("lease lost")
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		// stopAfter is how long run takes to return once ctx is done; cancel says whether ctx
		// ends at all, runErr what run returns.
		stopAfter time.Duration
		cancel    bool
		runErr    error
		wantErr   bool
	}{
		{name: "stops within the timeout", timeout: time.Second, stopAfter: 10 * time.Millisecond, cancel: true},
		{name: "overruns the timeout", timeout: 20 * time.Millisecond, stopAfter: time.Second, cancel: true, wantErr: true},
		{name: "zero does not wait", timeout: 0, stopAfter: time.Second, cancel: true},
		{name: "negative waits for ever", timeout: -1, stopAfter: 100 * time.Millisecond, cancel: true},
		{name: "run fails before shutdown", timeout: time.Second, runErr: failed, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			returned := make(chan struct{})
			run := func() error {
				defer close(returned)
				if tc.runErr != nil {
					return tc.runErr
				}
				<-ctx.Done()
				time.Sleep(tc.stopAfter)
				return nil
			}
			if tc.cancel {
				cancel()
			}
			start := time.Now()
			err := runWithShutdownTimeout(ctx, tc.timeout, run)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if tc.runErr != nil && !errors.Is(err, tc.runErr) {
				t.Errorf("err = %v, want run's %v", err, tc.runErr)
			}
			elapsed := time.Since(start)
			switch {
			case tc.timeout < 0 && elapsed < tc.stopAfter:
				t.Errorf("returned after %v, before run did", elapsed)
			case tc.timeout == 0 && elapsed > tc.stopAfter/2:
				t.Errorf("waited %v with gracefulShutDown 0", elapsed)
			case tc.timeout > 0 && elapsed > tc.timeout+500*time.Millisecond:
				t.Errorf("returned after %v, past the %v timeout", elapsed, tc.timeout)
			}
			<-returned
		})
	}
}
