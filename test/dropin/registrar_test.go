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

package dropin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// buildRegistrar builds spire-registrar's binary as a user would.
func buildRegistrar(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "spire-registrar")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/spire-registrar/spire-registrar/cmd/spire-registrar").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// registrar is a running spire-registrar process.
type registrar struct {
	cmd    *exec.Cmd
	log    string
	exited chan error
}

// startRegistrar runs bin in dir with args and env added to the environment.
func startRegistrar(t *testing.T, bin, dir string, args, env []string) *registrar {
	t.Helper()
	r := &registrar{log: filepath.Join(dir, "spire-registrar.log"), exited: make(chan error, 1)}
	logFile, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.exited <- r.cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() {
		if t.Failed() {
			if data, err := os.ReadFile(r.log); err == nil {
				t.Logf("spire-registrar log:\n%s", tail(data, 80))
			}
		}
		r.stop(t)
	})
	return r
}

// stop sends SIGTERM and waits for a clean exit; it is safe to call more than once.
func (r *registrar) stop(t *testing.T) {
	t.Helper()
	if r.cmd.ProcessState != nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.exited:
		if err != nil {
			t.Errorf("spire-registrar exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
		t.Errorf("spire-registrar still running 30s after SIGTERM")
	}
}

// waitReady waits until url answers 200, failing early if the process exits.
func (r *registrar) waitReady(ctx context.Context, url string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-r.exited:
			r.exited <- err
			return false, fmt.Errorf("spire-registrar exited: %v", err)
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

var fullResyncs = regexp.MustCompile(`^spire_registrar_full_resyncs_total$`)

// waitResyncs waits until spire-registrar's metrics count n successful full resyncs of each
// of its entry and federation controllers.
func waitResyncs(ctx context.Context, metricsURL string, n int) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := scrapeSeries(ctx, metricsURL, fullResyncs)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprint(got)
		ok := 0
		for labels, v := range got {
			if v >= float64(n) && strings.Contains(labels, `result="success"`) {
				ok++
			}
		}
		return ok >= 2, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d full resyncs of each controller (last: %s): %w", n, last, err)
	}
	return nil
}

// freeLoopbackAddr returns 127.0.0.1:<a port free right now>.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func tail(data []byte, lines int) string {
	n := 0
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n++
			if n > lines {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
