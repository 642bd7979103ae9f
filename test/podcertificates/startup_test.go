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

package podcertificates

import (
	"strings"
	"testing"
	"time"
)

// TestRegistrarRefusesANonDownstreamEntry starts spire-registrar with the pod certificate
// signer on while its entry is admin but not downstream: SPIRE would never sign it a CA, so
// it exits at start with a message that names the fix, instead of running without one. The
// other tests, whose entry differs only in being downstream, are the control.
func TestRegistrarRefusesANonDownstreamEntry(t *testing.T) {
	start := time.Now()
	w := newWorld(t, worldOptions{notDownstream: true})
	started := time.Now()
	r := w.start(t)
	select {
	case <-r.Done():
	case <-time.After(time.Minute):
		t.Fatal("spire-registrar still runs a minute after its start, without a CA")
	}
	if r.Err() == nil {
		t.Fatalf("spire-registrar exited with status 0:\n%s", r.Logs())
	}
	out := r.Logs()
	last := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	for _, want := range []string{"podCertificates.enabled", "downstream"} {
		if !strings.Contains(last, want) {
			t.Errorf("the last line of its output does not name %q:\n%s", want, last)
		}
	}
	t.Logf("spire-registrar exited (%v) %s after its start, saying:\n%s", r.Err(), time.Since(started).Round(time.Millisecond), last)
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
