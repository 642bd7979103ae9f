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
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestProcessReadings reads this process's RSS and CPU, and finds a child by a word only its
// command line has, as the bench finds spire-controller-manager by its config path.
func TestProcessReadings(t *testing.T) {
	rss, err := pidRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("pidRSS of this process = %d, %v; want at least 1 MiB", rss, err)
	}
	if _, err := pidCPU(os.Getpid()); err != nil {
		t.Errorf("pidCPU of this process: %v", err)
	}
	marker := "bench-find-pid-" + strings.ReplaceAll(t.Name(), "/", "-")
	// The marker is the shell's $0: in its command line, ignored by the script. The shell
	// waits in its builtin read, so it forks no child that would carry the marker too.
	cmd := exec.Command("sh", "-c", "read line", marker)
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sh: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	got, err := findPID(marker)
	if err != nil || got != cmd.Process.Pid {
		t.Errorf("findPID = %d, %v; want %d", got, err, cmd.Process.Pid)
	}
	if _, err := findPID(marker + "-absent"); err == nil {
		t.Error("findPID found a process no command line names")
	}
}
