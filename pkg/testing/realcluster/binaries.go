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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/mod/modfile"
)

// ModulePath is the module whose root holds hack/build-tools.sh.
const ModulePath = "github.com/spire-registrar/spire-registrar"

// ToolsBinEnv names the environment variable that overrides where the real
// binaries live; hack/build-tools.sh honours the same variable.
const ToolsBinEnv = "SPIRE_REGISTRAR_TOOLS_BIN"

// Names of the real binaries built by hack/build-tools.sh.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeScheduler         = "kube-scheduler"
	KubeControllerManager = "kube-controller-manager"
	Kubectl               = "kubectl"
	// SPIREServer is SPIRE 1.15.3, the server the tests run. An older server's entry API
	// is emulated in front of it (SPIREProxy), not built.
	SPIREServer = "spire-server"
	// SPIREAgent is the agent of the same SPIRE release as SPIREServer.
	SPIREAgent = "spire-agent"
	// Kwok is sigs.k8s.io/kwok v0.8.0, which plays the kubelet for fake nodes.
	Kwok = "kwok"
	// SpireControllerManager is spire-controller-manager v0.7.0, the drop-in anchor.
	SpireControllerManager = "spire-controller-manager"
)

// Logf receives human-readable progress messages. A nil Logf discards them.
type Logf func(format string, args ...any)

func (l Logf) printf(format string, args ...any) {
	if l != nil {
		l(format, args...)
	}
}

// RepoRoot returns the root directory of this module's checkout: the nearest
// directory holding a go.mod for ModulePath, searched upwards from the working
// directory and then from this source file (for binaries run from elsewhere).
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			if isModuleRoot(dir) {
				return dir, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("cannot find the %s checkout: no go.mod for it above %s", ModulePath, strings.Join(starts, " or "))
}

func isModuleRoot(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	return modfile.ModulePath(data) == ModulePath
}

// BinDir returns the directory holding the real binaries: $SPIRE_REGISTRAR_TOOLS_BIN if set,
// otherwise spire-registrar/bin under the user's cache directory ($XDG_CACHE_HOME or
// ~/.cache), as envtest keeps its binaries: they take long to build and depend only on the
// pinned tool modules, so every clone on the machine shares them.
func BinDir() (string, error) {
	if dir := os.Getenv(ToolsBinEnv); dir != "" {
		return filepath.Abs(dir)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory for the real binaries: set %s (%w)", ToolsBinEnv, err)
	}
	return filepath.Join(cache, "spire-registrar", "bin"), nil
}

// buildMu serialises builds within this process; buildLock (a file lock)
// serialises them across the test binaries `go test ./...` runs in parallel.
var buildMu sync.Mutex

// Binary returns the path of the named real binary (see Etcd, KubeAPIServer,
// SPIREServer and the other names above), building it with hack/build-tools.sh first if it is
// missing. A cold build takes minutes; progress goes to logf.
func Binary(ctx context.Context, logf Logf, name string) (string, error) {
	paths, err := Binaries(ctx, logf, name)
	if err != nil {
		return "", err
	}
	return paths[0], nil
}

// Binaries is Binary for several names at once, building all missing ones in
// a single hack/build-tools.sh run. It returns the paths in the order asked.
func Binaries(ctx context.Context, logf Logf, names ...string) ([]string, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = filepath.Join(dir, name)
	}
	if len(missing(paths)) == 0 {
		return paths, nil
	}

	buildMu.Lock()
	defer buildMu.Unlock()
	unlock, err := buildLock(ctx, logf, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have built them while we waited for the lock.
	todo := missing(paths)
	if len(todo) == 0 {
		return paths, nil
	}
	var toBuild []string
	for _, p := range todo {
		toBuild = append(toBuild, filepath.Base(p))
	}
	if err := runBuildTools(ctx, logf, dir, toBuild); err != nil {
		return nil, err
	}
	if still := missing(paths); len(still) > 0 {
		return nil, fmt.Errorf("hack/build-tools.sh succeeded but %s is still missing", strings.Join(still, ", "))
	}
	return paths, nil
}

func missing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			out = append(out, p)
		}
	}
	return out
}

// buildLock takes an exclusive flock on a file in dir, polling so that ctx
// can cancel the wait.
func buildLock(ctx context.Context, logf Logf, dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".build-tools.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open build lock: %w", err)
	}
	announced := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if !announced {
			logf.printf("realcluster: waiting for another process building the real binaries in %s", dir)
			announced = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for build lock: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// runBuildTools runs hack/build-tools.sh for the named tools, streaming its
// output line by line to logf.
func runBuildTools(ctx context.Context, logf Logf, binDir string, names []string) error {
	root, err := RepoRoot()
	if err != nil {
		return fmt.Errorf("cannot build %s: %w", strings.Join(names, ", "), err)
	}
	script := filepath.Join(root, "hack", "build-tools.sh")
	logf.printf("realcluster: %s missing from %s: building real binaries from pinned modules, first time takes several minutes", strings.Join(names, ", "), binDir)
	start := time.Now()

	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, names...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), ToolsBinEnv+"="+binDir)
	// The script runs go build children: cancel the whole group, not just bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	var tail []string
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			logf.printf("%s", line)
			tail = append(tail, line)
			if len(tail) > logTailLines {
				tail = tail[1:]
			}
		}
		// Keep draining so the child never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, pr)
	}()
	err = cmd.Run()
	pw.Close()
	<-scanned
	if err != nil {
		return fmt.Errorf("hack/build-tools.sh %s failed: %w\n%s", strings.Join(names, " "), err, strings.Join(tail, "\n"))
	}
	logf.printf("realcluster: built %s in %s", strings.Join(names, ", "), time.Since(start).Round(time.Second))
	return nil
}
