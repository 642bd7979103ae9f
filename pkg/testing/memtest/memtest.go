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

// Package memtest reads the process's memory as the kernel counts it, for tests that bound
// the peak memory a family of inputs may cost.
package memtest

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// Status returns a field of /proc/self/status given in kB (VmRSS, VmHWM), in bytes.
func Status(t testing.TB, field string) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", field, rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// ResetPeak makes the current resident set the process's peak (VmHWM) again, so that the
// next read of VmHWM measures only what follows.
func ResetPeak(t testing.TB) {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting VmHWM: %v", err)
	}
}

// Baseline returns memory to the OS, resets the peak and returns the resident set it starts
// from: VmHWM read later, minus it, is what came after.
func Baseline(t testing.TB) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	ResetPeak(t)
	return Status(t, "VmRSS")
}
