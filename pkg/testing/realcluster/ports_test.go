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

package realcluster

import (
	"errors"
	"testing"
)

func TestStartOnFreePorts(t *testing.T) {
	clash := errors.New("listen tcp 127.0.0.1:4242: bind: address already in use")
	other := errors.New("config is invalid")
	cases := []struct {
		name         string
		launchErr    error
		readyErrs    []error // per attempt; past the end means ready
		wantLaunches int
		wantErr      string
	}{
		{name: "ready at once", wantLaunches: 1},
		{name: "a lost port race is retried on new ports", readyErrs: []error{clash, clash}, wantLaunches: 3},
		{name: "losing every race gives up", readyErrs: []error{clash, clash, clash, clash}, wantLaunches: startAttempts,
			wantErr: "start thing: " + clash.Error()},
		{name: "other failures are not retried", readyErrs: []error{other}, wantLaunches: 1, wantErr: "start thing: config is invalid"},
		{name: "a launch error ends it as it is", launchErr: other, wantLaunches: 1, wantErr: "config is invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			launches := 0
			err := startOnFreePorts("thing", func() (*process, error) {
				launches++
				// Never started: kill is a no-op.
				return newProcess("thing", "/nonexistent", "/dev/null"), tc.launchErr
			}, func() error {
				if launches <= len(tc.readyErrs) {
					return tc.readyErrs[launches-1]
				}
				return nil
			})
			if launches != tc.wantLaunches {
				t.Errorf("%d launches, want %d", launches, tc.wantLaunches)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
