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
	"fmt"
	"time"
)

// runWithShutdownTimeout runs run and, once ctx is done, gives it timeout to return, with
// controller-runtime's meaning of gracefulShutDown: a negative timeout waits for ever, 0 does
// not wait at all, and a run still going when the timeout ends is an error, so the process
// exits non-zero. Before ctx is done, run's own return is passed on.
func runWithShutdownTimeout(ctx context.Context, timeout time.Duration, run func() error) error {
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	switch {
	case timeout < 0:
		return <-done
	case timeout == 0:
		return nil
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("controllers still running %v after shutdown began (gracefulShutDown)", timeout)
	}
}
