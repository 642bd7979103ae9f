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
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one long-running child managed by hand rather than through
// exec.CommandContext, so that it can be stopped gracefully, killed, restarted
// with the same arguments and always reaped.
type process struct {
	name    string
	path    string
	args    []string
	logPath string
	// env, if not nil, replaces the environment the child inherits.
	env []string
	// credential, if set, runs the child as another user (e.g. postgres,
	// which refuses to run as root).
	credential *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once the current child has been reaped
	err  error         // the child's exit status, valid after done is closed
}

func newProcess(name, path, logPath string, args ...string) *process {
	return &process{name: name, path: path, args: args, logPath: logPath}
}

// start launches the child in its own process group with stdout and stderr
// appended to the log file. It fails if the child is already running.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running", p.name)
		}
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	fmt.Fprintf(logFile, "=== %s starting at %s: %s %s\n", p.name, time.Now().Format(time.RFC3339Nano), p.path, strings.Join(p.args, " "))

	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	// An *os.File as stdout/stderr is handed to the child directly: no copying
	// goroutines that could outlive the process.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so signals reach any grandchildren too.
		Setpgid: true,
		// If the test binary dies (e.g. a go test timeout), take the child with it.
		Pdeathsig:  syscall.SIGKILL,
		Credential: p.credential,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "=== %s exited at %s: %v\n", p.name, time.Now().Format(time.RFC3339Nano), err)
		logFile.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited returns a channel closed when the current child has been reaped, or
// nil if the process was never started.
func (p *process) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// running reports whether a child is currently alive.
func (p *process) running() bool {
	done := p.exited()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exitErr describes why the child exited, including the tail of its log.
func (p *process) exitErr() error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err == nil {
		err = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited unexpectedly: %w\n%s", p.name, err, p.logTail(logTailLines))
}

// stop sends SIGTERM to the process group and escalates to SIGKILL after
// grace. It returns once the child has been reaped; stopping a process that is
// not running is a no-op.
func (p *process) stop(grace time.Duration) {
	p.signalAndWait(syscall.SIGTERM, grace)
}

// signal sends sig to the process group without waiting: SIGSTOP freezes it with its sockets
// open, SIGCONT thaws it.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s is not running", p.name)
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// kill sends SIGKILL to the process group and waits for the child to be reaped.
func (p *process) kill() {
	p.signalAndWait(syscall.SIGKILL, 0)
}

func (p *process) signalAndWait(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	// A negative pid addresses the whole process group.
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	if sig != syscall.SIGKILL {
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-done:
			return
		case <-timer.C:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	<-done
}

// logTailLines is how much of a process log errors carry.
const logTailLines = 30

// logTail returns the last n lines of the process log, framed for inclusion
// in an error message.
func (p *process) logTail(n int) string {
	return fmt.Sprintf("--- last %d lines of %s ---\n%s--- end of %s ---", n, p.logPath, tailFile(p.logPath, n), p.name)
}

// tailFile returns the last n lines of a file, or a note why it could not be read.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)\n", err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n"))) + "\n"
}
