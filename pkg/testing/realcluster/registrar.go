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
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// registrarBinary is spire-registrar built once for the test binary.
var registrarBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// RegistrarBinary returns the spire-registrar binary, built on first use by
// hack/build-image.sh exactly as the image and the release build it. Every test of
// the test binary shares it, so a package's tests pay for one build. The path has its
// symlinks resolved: it is what the kernel reports as the running process's executable, which
// a spire-agent's unix:path selector is matched against.
//
// The binary outlives every test, so no t.Cleanup removes it: a package that calls
// RegistrarBinary calls RemoveRegistrarBinary from its TestMain after m.Run.
func RegistrarBinary(t testing.TB) string {
	t.Helper()
	registrarBinary.once.Do(func() {
		registrarBinary.path, registrarBinary.err = buildRegistrar()
	})
	if registrarBinary.err != nil {
		t.Fatal(registrarBinary.err)
	}
	return registrarBinary.path
}

func buildRegistrar() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("cannot build spire-registrar: %w", err)
	}
	if registrarBinary.dir, err = os.MkdirTemp("", "spire-registrar-bin-"); err != nil {
		return "", err
	}
	// The release's build (hack/build-image.sh: static, -trimpath, stripped), so that the
	// tests run the binary the image ships and share its compilation with test/image.
	cmd := exec.Command(filepath.Join(root, "hack", "build-image.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "BINARIES_ONLY=1", "BIN_DIR="+registrarBinary.dir, "PLATFORMS=linux/"+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("hack/build-image.sh: %w\n%s", err, out)
	}
	return filepath.EvalSymlinks(filepath.Join(registrarBinary.dir, "linux_"+runtime.GOARCH, "spire-registrar"))
}

// RemoveRegistrarBinary removes the binary RegistrarBinary built, if it built one. It is for
// TestMain, after m.Run; no test may use the binary afterwards.
func RemoveRegistrarBinary() error {
	if registrarBinary.dir == "" {
		return nil
	}
	return os.RemoveAll(registrarBinary.dir)
}

// SyncBuffer collects a process's output while a test reads it: Write and String may be
// called from different goroutines. The zero value is an empty buffer ready to use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// registrarStopGrace is how long a registrar has to exit after SIGTERM before it is killed.
const registrarStopGrace = 15 * time.Second

// RegistrarOptions say how NewRegistrar runs spire-registrar.
type RegistrarOptions struct {
	// Binary is the spire-registrar binary to run; empty runs RegistrarBinary's.
	Binary string
	// Kubeconfig is passed as --kubeconfig; empty passes none.
	Kubeconfig string
	// Config is the text of the config file, which NewRegistrar writes to a file of the
	// test's and passes as --config; empty passes none.
	Config string
	// Flags come after the ones NewRegistrar passes, so they may override them.
	Flags []string
}

// Registrar is a spire-registrar process a test runs, serving /healthz, /readyz and /metrics
// on ports of its own on 127.0.0.1 and logging at -v=2 into a buffer the test reads.
type Registrar struct {
	cmd     *exec.Cmd
	logs    SyncBuffer
	started time.Time
	health  string // address of /healthz and /readyz
	metrics string // address of /metrics
	done    chan struct{}
	err     error // the exit status, set before done is closed
}

// NewRegistrar runs spire-registrar as opts say, with --health-probe-bind-address and
// --metrics-bind-address on free loopback ports and -v=2, then opts.Flags. When the test ends
// the process gets SIGTERM and, if it has not exited 15s later, SIGKILL; if the test failed,
// its output is logged then. The process dies with the test binary (Pdeathsig), so a go test
// timeout leaves none behind.
//
// The ports were free a moment before the start; NewRegistrar does not retry if another
// process takes one first, since some tests want the process to exit at start.
func NewRegistrar(t testing.TB, opts RegistrarOptions) *Registrar {
	t.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = RegistrarBinary(t)
	}
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	r := &Registrar{
		health:  "127.0.0.1:" + strconv.Itoa(ports[0]),
		metrics: "127.0.0.1:" + strconv.Itoa(ports[1]),
		done:    make(chan struct{}),
	}
	var args []string
	if opts.Kubeconfig != "" {
		args = append(args, "--kubeconfig", opts.Kubeconfig)
	}
	if opts.Config != "" {
		configPath := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(configPath, []byte(opts.Config), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", configPath)
	}
	args = append(args, "--health-probe-bind-address", r.health, "--metrics-bind-address", r.metrics, "-v=2")
	r.cmd = exec.Command(bin, append(args, opts.Flags...)...)
	r.cmd.Stdout, r.cmd.Stderr = &r.logs, &r.logs
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r.started = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(registrarStopGrace):
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("spire-registrar output:\n%s", r.Logs())
		}
	})
	return r
}

// Logs returns the process's stdout and stderr so far, interleaved as written.
func (r *Registrar) Logs() string { return r.logs.String() }

// Started is when the process was started.
func (r *Registrar) Started() time.Time { return r.started }

// Done is closed once the process has exited and been reaped.
func (r *Registrar) Done() <-chan struct{} { return r.done }

// Err is the process's exit status once Done is closed (nil for status 0), and nil before.
func (r *Registrar) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Pid is the process's ID, to read what /proc says of it.
func (r *Registrar) Pid() int { return r.cmd.Process.Pid }

// Ready reports whether /readyz answers 200 now: every controller synced with SPIRE once (and
// the pod certificate controller, when on, holds a CA and published the trust bundle).
func (r *Registrar) Ready() bool {
	code, _, err := r.Readyz(context.Background())
	return err == nil && code == http.StatusOK
}

// Readyz asks /readyz and returns its status code and body.
func (r *Registrar) Readyz(ctx context.Context) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.health+"/readyz", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body), err
}

// WaitReady waits up to a minute until Ready, failing the test at once if the process exits.
func (r *Registrar) WaitReady(t testing.TB) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-r.done:
			return false, fmt.Errorf("spire-registrar exited: %v", r.err)
		default:
		}
		return r.Ready(), nil
	})
	if err != nil {
		t.Fatalf("spire-registrar not ready within a minute: %v", err)
	}
}

// Scrape reads /metrics into a map from series, its name and labels as printed (e.g.
// `x_total{result="success"}`), to value.
func (r *Registrar) Scrape(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseSeries(resp.Body)
}

// parseSeries reads the Prometheus text format into a map from series to value; comments and
// blank lines are skipped.
func parseSeries(body io.Reader) (map[string]float64, error) {
	series := map[string]float64{}
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		series[line[:i]] = v
	}
	return series, sc.Err()
}
