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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// podman runs Debian's podman with what these machines need (FACTS.md: no journald, runc
// instead of crun, cgroupfs, no default ulimits) and a storage of its own, so that a test run
// neither reads nor leaves images in the machine's.
type podman struct {
	global []string
	env    []string
}

// newPodman sets up a private podman storage under dir.
func newPodman(dir string) (*podman, error) {
	if _, err := exec.LookPath("podman"); err != nil {
		return nil, fmt.Errorf("podman is not installed (hack/install-deps.sh installs it): %w", err)
	}
	conf := filepath.Join(dir, "containers.conf")
	// The sandbox refuses crun's and podman's default RLIMIT_NOFILE.
	if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n"), 0o644); err != nil {
		return nil, err
	}
	return &podman{
		global: []string{
			"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"),
			"--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs",
			"--events-backend", "none",
		},
		env: append(os.Environ(), "CONTAINERS_CONF="+conf),
	}, nil
}

// run runs podman with args and returns its standard output.
func (p *podman) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "podman", append(append([]string{}, p.global...), args...)...)
	cmd.Env = p.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// logs returns what the container wrote to its standard output and error.
func (p *podman) logs(name string) string {
	cmd := exec.Command("podman", append(append([]string{}, p.global...), "logs", name)...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("podman logs %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// imageConfig is the part of `podman image inspect` the chart depends on.
type imageConfig struct {
	User       string   `json:"User"`
	WorkingDir string   `json:"WorkingDir"`
	Entrypoint []string `json:"Entrypoint"`
	Cmd        []string `json:"Cmd"`
}

// inspect returns the image's config.
func (p *podman) inspect(ctx context.Context, image string) (imageConfig, error) {
	out, err := p.run(ctx, "image", "inspect", "--format", "{{json .Config}}", image)
	if err != nil {
		return imageConfig{}, err
	}
	var c imageConfig
	if err := json.Unmarshal(out, &c); err != nil {
		return imageConfig{}, fmt.Errorf("decode image config %s: %w", out, err)
	}
	return c, nil
}

// builtImage is the image hack/build-image.sh builds, once per test binary.
var builtImage struct {
	once   sync.Once
	podman *podman
	ref    string
	binary string
	took   time.Duration
	err    error
}

// imageForTest builds the image with hack/build-image.sh, as `make image` and the release
// workflow do, into a podman storage that is removed when the test binary exits.
func imageForTest(t *testing.T) (*podman, string, string) {
	t.Helper()
	b := &builtImage
	b.once.Do(func() {
		start := time.Now()
		dir, err := os.MkdirTemp("", "image-test-")
		if err != nil {
			b.err = err
			return
		}
		cleanups = append(cleanups, func() { _ = os.RemoveAll(dir) })
		if b.podman, err = newPodman(dir); err != nil {
			b.err = err
			return
		}
		b.ref = "localhost/spire-registrar:test"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, repoPath("hack", "build-image.sh"))
		cmd.Dir = repoPath()
		cmd.Env = append(append([]string{}, b.podman.env...),
			"IMAGE="+b.ref, "CONTAINER_TOOL=podman", "CONTAINER_TOOL_FLAGS="+strings.Join(b.podman.global, " "))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("hack/build-image.sh: %w\n%s", err, out)
			return
		}
		arch, err := exec.Command("go", "env", "GOARCH").Output()
		if err != nil {
			b.err = err
			return
		}
		b.binary = repoPath("_output", "image", "linux_"+strings.TrimSpace(string(arch)), "spire-registrar")
		b.took = time.Since(start)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	t.Logf("image %s built by hack/build-image.sh in %v", b.ref, b.took.Round(time.Millisecond))
	return b.podman, b.ref, b.binary
}

// cleanups run after every test of the package.
var cleanups []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	os.Exit(code)
}
