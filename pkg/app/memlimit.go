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
	"errors"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
)

// memoryLimitShare is the share of the container's memory limit the Go heap is held to when
// GOMEMLIMIT is not set: the rest is for what the Go runtime does not count (stacks of cgo,
// the binary) and for the collector to catch up before the kernel kills the process.
const memoryLimitShare = 0.9

// cgroupMemoryLimitFiles are where a container reads its own memory limit: cgroup v2's, then
// v1's.
var cgroupMemoryLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// cgroupV1Unlimited is the smallest value cgroup v1 reports for no limit (the page-aligned
// maximum int64).
const cgroupV1Unlimited = 1 << 62

// applyContainerMemoryLimit holds the Go heap below the container's memory limit when
// GOMEMLIMIT does not already. Without it the collector paces itself by GOGC alone: after the
// garbage of a bulk the heap may grow toward twice the live data, past a limit the live data
// fits in, and the container is killed.
func applyContainerMemoryLimit(logger klog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	limit, file, err := containerMemoryLimit(os.ReadFile)
	if err != nil {
		logger.Info("Warning: could not read the container's memory limit; the Go heap is not held below it", "file", file, "err", err)
		return
	}
	if limit == 0 {
		return
	}
	goLimit := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(goLimit)
	logger.Info("Holding the Go heap below the container's memory limit (set GOMEMLIMIT to choose otherwise)",
		"containerLimitBytes", limit, "goMemoryLimitBytes", goLimit)
}

// containerMemoryLimit returns the memory limit of the process's cgroup in bytes, and the file
// it read it from; 0 when there is none or no cgroup file to tell.
func containerMemoryLimit(readFile func(string) ([]byte, error)) (int64, string, error) {
	for _, file := range cgroupMemoryLimitFiles {
		data, err := readFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, file, err
		}
		value := strings.TrimSpace(string(data))
		if value == "max" {
			return 0, file, nil
		}
		limit, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, file, err
		}
		if limit <= 0 || limit >= cgroupV1Unlimited {
			return 0, file, nil
		}
		return limit, file, nil
	}
	return 0, "", nil
}
