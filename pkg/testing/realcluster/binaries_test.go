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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeBuildTools stands in for hack/build-tools.sh: it records each call and
// makes an executable per name, except for "bad", where it fails.
const fakeBuildTools = `#!/usr/bin/env bash
set -eu
echo "$*" >> "$SPIRE_REGISTRAR_TOOLS_BIN/calls"
for n in "$@"; do
  echo "fake: building $n"
  if [[ $n == bad ]]; then echo "fake: boom"; exit 3; fi
  printf '#!/bin/sh\n' > "$SPIRE_REGISTRAR_TOOLS_BIN/$n"
  chmod +x "$SPIRE_REGISTRAR_TOOLS_BIN/$n"
done
`

// fakeRepo makes a checkout of our module with a fake build script and
// enters it, so RepoRoot and BinDir resolve there.
func fakeRepo(t *testing.T) string {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+ModulePath+"\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hack", "build-tools.sh"), []byte(fakeBuildTools), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "pkg", "x")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	t.Setenv(ToolsBinEnv, "")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(root, "cache"))
	return root
}

type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func TestBinariesBuildsMissingOnce(t *testing.T) {
	root := fakeRepo(t)
	if got, err := RepoRoot(); err != nil || got != root {
		t.Fatalf("RepoRoot() = %q, %v; want %q", got, err, root)
	}
	var log logSink
	paths, err := Binaries(t.Context(), log.logf, "one", "two")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "cache", "spire-registrar", "bin")
	if paths[0] != filepath.Join(bin, "one") || paths[1] != filepath.Join(bin, "two") {
		t.Fatalf("paths %v", paths)
	}
	for _, want := range []string{"building real binaries from pinned modules", "fake: building one", "fake: building two"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, log.String())
		}
	}
	// Present binaries are used as they are.
	if _, err := Binary(t.Context(), log.logf, "one"); err != nil {
		t.Fatal(err)
	}
	calls, err := os.ReadFile(filepath.Join(bin, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	if string(calls) != "one two\n" {
		t.Fatalf("build script calls %q, want one call for both", calls)
	}
}

func TestBinariesReportsBuildFailure(t *testing.T) {
	fakeRepo(t)
	_, err := Binary(t.Context(), nil, "bad")
	if err == nil || !strings.Contains(err.Error(), "hack/build-tools.sh bad failed") || !strings.Contains(err.Error(), "fake: boom") {
		t.Fatalf("got %v, want the failure with the script's output", err)
	}
}

func TestBinDirHonoursEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(ToolsBinEnv, dir)
	if got, err := BinDir(); err != nil || got != dir {
		t.Fatalf("BinDir() = %q, %v; want %q", got, err, dir)
	}
}
