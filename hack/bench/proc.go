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

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// pidRSS reads VmRSS, in bytes, of a process.
func pidRSS(pid int) (uint64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("read status of process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if fields := strings.Fields(rest); len(fields) >= 1 {
				kb, err := strconv.ParseUint(fields[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("VmRSS of process %d: %w", pid, err)
				}
				return kb * 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("process %d has no VmRSS", pid)
}

// pidCPU reads the CPU seconds, user plus system, a process has used so far.
func pidCPU(pid int) (float64, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	// Fields after the parenthesised command name: utime and stime are the 12th and 13th.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat of process %d is malformed", pid)
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat of process %d is malformed", pid)
	}
	return float64(utime+stime) / clockTicks, nil
}

// findPID returns the one process whose command line contains match, e.g. a config path only
// that process was given.
func findPID(match string) (int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), match) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d processes have %q in their command line, want 1", len(found), match)
	}
	return found[0], nil
}

// sumSeries sums the series of the named metric whose label set contains every one of
// labels (each written as name="value"), in a Prometheus text exposition.
func sumSeries(exposition []byte, name string, labels ...string) (float64, error) {
	var sum float64
	for line := range strings.Lines(string(exposition)) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		end := strings.LastIndex(rest, "}") + 1
		matches := true
		for _, l := range labels {
			matches = matches && strings.Contains(rest[:end], l)
		}
		if !matches {
			continue
		}
		fields := strings.Fields(rest[end:])
		if len(fields) == 0 {
			return 0, fmt.Errorf("malformed series %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("malformed series %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
