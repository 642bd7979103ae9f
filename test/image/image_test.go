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

package image_test

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// buildFlags are the Dockerfile's go build flags (shell-quoted there), which TestDockerfile
// finds in it.
var buildFlags = []string{"-trimpath", "-ldflags=-s -w"}

// TestImageBinaryIsStatic builds the binary as the Dockerfile does and checks it needs no
// dynamic loader and no shared library, so it runs on distroless/static, which has no libc.
func TestImageBinaryIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "spire-registrar")
	build := exec.CommandContext(t.Context(), goCmd, append(append([]string{"build"}, buildFlags...), "-o", bin, "./cmd/spire-registrar")...)
	build.Dir = repoPath()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built with CGO_ENABLED=0 in %v", time.Since(start).Round(time.Millisecond))

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			t.Errorf("the binary has a PT_INTERP header: it needs a dynamic loader")
		case elf.PT_DYNAMIC:
			t.Errorf("the binary has a PT_DYNAMIC header: it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Errorf("reading DT_NEEDED: %v", err)
	} else if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	if f.Section(".dynamic") != nil || f.Section(".interp") != nil {
		t.Errorf("the binary has a .dynamic or .interp section")
	}

	// And it runs: -h prints the flags.
	out, _ := exec.CommandContext(t.Context(), bin, "-h").CombinedOutput()
	if !strings.Contains(string(out), "-config") {
		t.Errorf("%s -h printed:\n%s", bin, out)
	}
}

// dockerfileStage is one FROM ... stage of the Dockerfile, with its instructions (continuation
// lines joined, comments dropped).
type dockerfileStage struct {
	from         string
	instructions []string
}

func readDockerfile(t *testing.T) []dockerfileStage {
	t.Helper()
	data, err := os.ReadFile(repoPath("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []dockerfileStage
	var current strings.Builder
	flush := func() {
		line := strings.TrimSpace(current.String())
		current.Reset()
		if line == "" {
			return
		}
		if fields := strings.Fields(line); strings.EqualFold(fields[0], "FROM") {
			stages = append(stages, dockerfileStage{from: line})
			return
		}
		if len(stages) > 0 {
			stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, line)
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if trimmed, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), "\\"); ok {
			current.WriteString(trimmed + " ")
			continue
		}
		current.WriteString(line)
		flush()
	}
	flush()
	return stages
}

// TestDockerfile checks the Dockerfile builds the binary as TestImageBinaryIsStatic does, on a
// base with no libc, as a non-root user, from every directory the binary's code is in.
func TestDockerfile(t *testing.T) {
	stages := readDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, found %d stages", len(stages))
	}
	builder, final := stages[0], stages[len(stages)-1]

	if !strings.Contains(builder.from, "golang:1.26") {
		t.Errorf("builder stage %q does not use golang:1.26", builder.from)
	}
	var build string
	for _, in := range builder.instructions {
		if strings.HasPrefix(in, "RUN") && strings.Contains(in, "go build") {
			build = in
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-ldflags='-s -w'", "./cmd/spire-registrar"} {
		if !strings.Contains(build, want) {
			t.Errorf("the go build step %q lacks %s", build, want)
		}
	}

	base := strings.Fields(final.from)[len(strings.Fields(final.from))-1]
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final stage is based on %s, want distroless/static or scratch", base)
	}
	var user string
	for _, in := range final.instructions {
		if f := strings.Fields(in); strings.EqualFold(f[0], "USER") {
			user = f[1]
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid != "65532" && uid != "nonroot" {
		t.Errorf("final stage runs as user %q, want 65532 (nonroot)", user)
	}

	// Every directory of this module the binary is built from is copied into the builder.
	copied := map[string]bool{}
	for _, in := range builder.instructions {
		f := strings.Fields(in)
		if !strings.EqualFold(f[0], "COPY") || slices.ContainsFunc(f, func(s string) bool { return strings.HasPrefix(s, "--from") }) {
			continue
		}
		for _, src := range f[1 : len(f)-1] {
			copied[strings.TrimSuffix(src, "/")] = true
		}
	}
	if !copied["go.mod"] || !copied["go.sum"] {
		t.Errorf("go.mod and go.sum are not copied: %v", copied)
	}
	list := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/spire-registrar")
	list.Dir = repoPath()
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderrOf(err))
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(repoPath(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if top, _, _ := strings.Cut(filepath.ToSlash(rel), "/"); !copied[top] {
			t.Errorf("the binary is built from %s, but the Dockerfile does not copy %s/", rel, top)
		}
	}

	ignore, err := os.ReadFile(repoPath(".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "_output", "results"} {
		if !slices.Contains(strings.Fields(string(ignore)), want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}

// repoPath returns a path in the repository checkout.
func repoPath(elem ...string) string {
	root, err := realcluster.RepoRoot()
	if err != nil {
		panic(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// stderrOf returns what a failed command wrote to its standard error.
func stderrOf(err error) string {
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(ee.Stderr)
	}
	return ""
}
