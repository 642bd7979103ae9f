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
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// controllerStopGrace is how long a controller process has to exit after SIGTERM.
const controllerStopGrace = 30 * time.Second

// buildRegistrar builds cmd/spire-registrar as a user would, into a new temporary directory,
// and returns the binary's path and the directory to remove.
func buildRegistrar(ctx context.Context) (bin, dir string, err error) {
	root, err := realcluster.RepoRoot()
	if err != nil {
		return "", "", err
	}
	if dir, err = os.MkdirTemp("", "bench-registrar-"); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "spire-registrar")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/spire-registrar")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("go build ./cmd/spire-registrar: %w: %s", err, out)
	}
	return bin, dir, nil
}

// registrarConfig is what a run's spire-registrar process is configured with.
type registrarConfig struct {
	// className is the class of the run's ClusterSPIFFEIDs.
	className  string
	spire      *realcluster.SPIRE
	kubeconfig string
	workers    int
	// gcInterval is the full resync interval; zero leaves spire-registrar's default.
	gcInterval time.Duration
	// profiling starts the process with --profiling; with startupProfile > 0 a CPU profile
	// of that long is also taken from the moment the process serves, named cpu-<logName>.
	profiling      bool
	startupProfile time.Duration
	// maxResyncShare, when set, is passed as --max-resync-share: 1 lets resyncs run back to
	// back at a short gcInterval.
	maxResyncShare float64
	// workloadAPISocket, when set, makes spire-registrar reach SPIRE's TCP API with an
	// X509-SVID from the agent serving this Workload API, instead of the admin socket.
	workloadAPISocket string
	// extra are config lines appended to the file.
	extra string
}

// registrarProcess is spire-registrar running as its own process, as in production, so that
// its RSS and CPU are its own.
type registrarProcess struct {
	cmd        *exec.Cmd
	logFile    *os.File
	exited     chan struct{}
	readyURL   string
	metricsURL string
	// profileWait waits for the start-up CPU profile, if one was asked for.
	profileWait func()
}

// startRegistrar writes a config file into dir, starts bin on it and waits until its
// readiness endpoint answers 200: every controller has finished its first full resync with
// SPIRE. It returns the time from just before the process started until then.
func startRegistrar(ctx context.Context, bin, dir, logName string, c registrarConfig, timeout time.Duration) (_ *registrarProcess, ready time.Duration, err error) {
	conf := fmt.Sprintf(`apiVersion: spire.spiffe.io/v1alpha1
kind: ControllerManagerConfig
trustDomain: %s
clusterName: %s
clusterDomain: cluster.local
className: %s
`, c.spire.TrustDomain(), clusterName, c.className)
	if c.workloadAPISocket != "" {
		conf += fmt.Sprintf("spireServerAddress: %s\nworkloadAPISocketPath: %s\n", c.spire.Address(), c.workloadAPISocket)
	} else {
		conf += fmt.Sprintf("spireServerSocketPath: %s\n", c.spire.SocketPath())
	}
	conf += c.extra
	if c.gcInterval > 0 {
		conf += fmt.Sprintf("gcInterval: %s\n", c.gcInterval)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
	}
	confPath := filepath.Join(dir, logName+".yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, 0, fmt.Errorf("write spire-registrar config: %w", err)
	}
	ports, err := loopbackPorts(2)
	if err != nil {
		return nil, 0, err
	}
	p := &registrarProcess{
		exited:     make(chan struct{}),
		readyURL:   "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/readyz",
		metricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/metrics",
	}
	if p.logFile, err = os.Create(filepath.Join(dir, logName+".log")); err != nil {
		return nil, 0, err
	}
	p.cmd = exec.Command(bin, "--config="+confPath, "--kubeconfig="+c.kubeconfig,
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--workers="+strconv.Itoa(c.workers))
	if c.profiling {
		p.cmd.Args = append(p.cmd.Args, "--profiling")
	}
	if c.maxResyncShare > 0 {
		p.cmd.Args = append(p.cmd.Args, "--max-resync-share="+strconv.FormatFloat(c.maxResyncShare, 'g', -1, 64))
	}
	p.cmd.Stdout, p.cmd.Stderr = p.logFile, p.logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		p.logFile.Close()
		return nil, 0, fmt.Errorf("start spire-registrar: %w", err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	client := &http.Client{Timeout: time.Second}
	p.profileWait = func() {}
	if c.profiling && c.startupProfile > 0 {
		p.profileWait = profileOnceServing(ctx, client, p.metricsURL, newProfiler(p.metricsURL, dir), logName, c.startupProfile)
	}
	deadline := start.Add(timeout)
	for {
		if resp, err := client.Get(p.readyURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, time.Since(start), nil
			}
		}
		select {
		case <-p.exited:
			return nil, 0, fmt.Errorf("spire-registrar exited before it was ready; see %s", p.logFile.Name())
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("spire-registrar not ready after %v; see %s", timeout, p.logFile.Name())
		}
	}
}

// profileOnceServing takes a CPU profile of d, starting as soon as the metrics server answers.
func profileOnceServing(ctx context.Context, client *http.Client, metricsURL string, prof profiler, phase string, d time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if resp, err := client.Get(metricsURL); err == nil {
				resp.Body.Close()
				prof.cpu(ctx, phase, d)()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() { <-done }
}

func (p *registrarProcess) pid() int                { return p.cmd.Process.Pid }
func (p *registrarProcess) metricsEndpoint() string { return p.metricsURL }

// stop sends SIGTERM and waits for the exit, killing the process after a grace period. It is
// safe to call more than once.
func (p *registrarProcess) stop() error {
	defer p.logFile.Close()
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(controllerStopGrace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New("spire-registrar ignored SIGTERM and was killed")
	}
}

// loopbackPorts returns n distinct TCP ports free on 127.0.0.1 right now.
func loopbackPorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
