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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultAgentSyncInterval is how often an Agent asks the server for its entries unless told
// otherwise: far below the agent's own 5 s, so that tests see entry changes quickly.
const DefaultAgentSyncInterval = time.Second

// AgentOptions configures StartAgent.
type AgentOptions struct {
	// Server is the spire-server the agent attests to (with a join token it generates) and
	// syncs from, over the server's TCP address on 127.0.0.1. Required.
	Server *SPIRE
	// SyncInterval is the agent's experimental.sync_interval; default DefaultAgentSyncInterval.
	SyncInterval time.Duration
	// DiscoverWorkloadPath makes the unix workload attestor add the workload's executable as
	// a unix:path selector, so that processes of one uid can be told apart.
	DiscoverWorkloadPath bool
	// LogLevel is DEBUG, INFO, WARN or ERROR; default DEBUG, which logs each SVID rotation.
	LogLevel string
	// Logf receives progress messages. Optional.
	Logf Logf
}

// Agent is a running spire-agent attested to a SPIRE server with a join token, with the unix
// workload attestor and its Workload API on a unix socket in a directory of its own.
type Agent struct {
	dir        string
	socketPath string
	id         string
	server     *SPIRE
	proc       *process

	mu      sync.Mutex
	stopped bool
}

// StartAgent generates a join token on the server, writes the server's trust bundle and an
// agent config, starts spire-agent and waits until its Workload API reports healthy, which it
// does once the agent has attested and synced.
func StartAgent(ctx context.Context, opts AgentOptions) (*Agent, error) {
	if opts.Server == nil {
		return nil, errors.New("AgentOptions.Server is required")
	}
	bin, err := Binary(ctx, opts.Logf, SPIREAgent)
	if err != nil {
		return nil, err
	}
	a := &Agent{server: opts.Server}
	// os.MkdirTemp("", ...) rather than a test's TempDir: short enough for the socket.
	if a.dir, err = os.MkdirTemp("", "spire-agent-"); err != nil {
		return nil, fmt.Errorf("create spire-agent dir: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = a.Stop()
		}
	}()
	a.socketPath = filepath.Join(a.dir, "workload.sock")

	token, err := opts.Server.GenerateJoinToken(ctx)
	if err != nil {
		return nil, err
	}
	a.id = "spiffe://" + opts.Server.TrustDomain() + "/spire/agent/join_token/" + token
	bundle, err := opts.Server.CLI(ctx, "bundle show")
	if err != nil {
		return nil, err
	}
	bundlePath := filepath.Join(a.dir, "bundle.pem")
	if err := os.WriteFile(bundlePath, bundle, 0o644); err != nil {
		return nil, fmt.Errorf("write trust bundle: %w", err)
	}
	if err := a.writeConfig(opts, token, bundlePath); err != nil {
		return nil, err
	}
	a.proc = newProcess(SPIREAgent, bin, filepath.Join(a.dir, "spire-agent.log"), "run", "-config", a.configPath())
	opts.Logf.printf("realcluster: starting %s as %s, Workload API on %s", SPIREAgent, a.id, a.socketPath)
	if err := a.proc.start(); err != nil {
		return nil, err
	}
	if err := a.waitReady(ctx, bin); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// NewAgent starts a spire-agent for a test and stops it in t.Cleanup; it fails the test if
// start-up fails. On test failure the log's tail is logged.
func NewAgent(t testing.TB, opts AgentOptions) *Agent {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	start := time.Now()
	a, err := StartAgent(t.Context(), opts)
	if err != nil {
		t.Fatalf("start spire-agent: %v", err)
	}
	t.Logf("realcluster: spire-agent %s ready in %s", a.id, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", a.proc.logTail(logTailLines))
		}
		if err := a.Stop(); err != nil {
			t.Errorf("stop spire-agent: %v", err)
		}
	})
	return a
}

func (a *Agent) configPath() string { return filepath.Join(a.dir, "agent.conf") }

func (a *Agent) writeConfig(opts AgentOptions, token, bundlePath string) error {
	q := strconv.Quote
	logLevel := opts.LogLevel
	if logLevel == "" {
		logLevel = "DEBUG"
	}
	syncInterval := opts.SyncInterval
	if syncInterval <= 0 {
		syncInterval = DefaultAgentSyncInterval
	}
	host, port, _ := strings.Cut(opts.Server.Address(), ":")
	unix := "plugin_data {}"
	if opts.DiscoverWorkloadPath {
		// A size limit of -1 skips hashing the executable: the path is what tells apart.
		unix = "plugin_data {\n            discover_workload_path = true\n            workload_size_limit = -1\n        }"
	}
	conf := fmt.Sprintf(`agent {
    data_dir = %s
    log_level = %s
    server_address = %s
    server_port = %s
    socket_path = %s
    trust_bundle_path = %s
    trust_domain = %s
    join_token = %s
    experimental {
        sync_interval = %s
    }
}

plugins {
    NodeAttestor "join_token" {
        plugin_data {}
    }

    KeyManager "memory" {
        plugin_data {}
    }

    WorkloadAttestor "unix" {
        %s
    }
}
`, q(filepath.Join(a.dir, "data")), q(logLevel), q(host), q(port), q(a.socketPath), q(bundlePath),
		q(opts.Server.TrustDomain()), q(token), q(syncInterval.String()), unix)
	if err := os.WriteFile(a.configPath(), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("write spire-agent config: %w", err)
	}
	return nil
}

// waitReady polls `spire-agent healthcheck` on the Workload API socket, failing early if the
// agent exits.
func (a *Agent) waitReady(ctx context.Context, bin string) error {
	ctx, cancel := context.WithTimeout(ctx, spireReadyTimeout)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !a.proc.running() {
			return false, a.proc.exitErr()
		}
		if _, err := os.Stat(a.socketPath); err != nil {
			last = "no Workload API socket yet"
			return false, nil
		}
		cliCtx, cancel := context.WithTimeout(ctx, cliTimeout)
		defer cancel()
		out, err := exec.CommandContext(cliCtx, bin, "healthcheck", "-socketPath", a.socketPath).CombinedOutput()
		if err != nil {
			last = strings.TrimSpace(string(out) + " " + err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if !a.proc.running() {
			return a.proc.exitErr()
		}
		return fmt.Errorf("wait for spire-agent healthcheck (last: %s): %w\n%s", last, err, a.proc.logTail(logTailLines))
	}
	return nil
}

// ID returns the agent's SPIFFE ID, spiffe://<trust domain>/spire/agent/join_token/<token>:
// the parent ID of the entries it is to issue.
func (a *Agent) ID() string { return a.id }

// SocketPath returns the path of the agent's Workload API socket.
func (a *Agent) SocketPath() string { return a.socketPath }

// WorkloadAPIAddress returns the Workload API as go-spiffe and SPIFFE_ENDPOINT_SOCKET take it.
func (a *Agent) WorkloadAPIAddress() string { return "unix://" + a.socketPath }

// LogTail returns the last n lines of the agent log, for failure reports.
func (a *Agent) LogTail(n int) string { return a.proc.logTail(n) }

// Log returns the agent's whole log so far.
func (a *Agent) Log() (string, error) {
	data, err := os.ReadFile(a.proc.logPath)
	return string(data), err
}

// WaitForSVIDCached waits until the agent's log says it holds an X509-SVID for spiffeID: the
// agent synced the entry and signed its SVID, so a workload it matches gets it at once.
func (a *Agent) WaitForSVIDCached(ctx context.Context, spiffeID string) error {
	want := regexp.MustCompile(`msg="SVID updated" .*spiffe_id=` + regexp.QuoteMeta(strconv.Quote(spiffeID)))
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		log, err := a.Log()
		return err == nil && want.MatchString(log), nil
	})
	if err != nil {
		return fmt.Errorf("spire-agent holds no X509-SVID for %s after a minute: %w\n%s", spiffeID, err, a.proc.logTail(logTailLines))
	}
	return nil
}

// CreateWorkloadEntryCLI creates, through the server's CLI, an entry the agent issues to the
// workloads its selectors (e.g. "unix:uid:0") match: parentID is the agent's ID. flags are
// passed on, e.g. "-admin" or "-x509SVIDTTL", "30".
func (a *Agent) CreateWorkloadEntryCLI(ctx context.Context, spiffeID string, selectors []string, flags ...string) (Entry, error) {
	return a.server.CreateEntryCLI(ctx, EntrySpec{SPIFFEID: spiffeID, ParentID: a.id, Selectors: selectors, ExtraFlags: flags})
}

// Stop stops the agent and removes its directory. It is safe to call more than once.
func (a *Agent) Stop() error {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return nil
	}
	a.stopped = true
	a.mu.Unlock()
	if a.proc != nil {
		a.proc.stop(spireStopGrace)
	}
	if err := os.RemoveAll(a.dir); err != nil {
		return fmt.Errorf("remove %s: %w", a.dir, err)
	}
	return nil
}

// GenerateJoinToken has the server generate a one-time join token for an agent, through the
// CLI (`spire-server token generate`).
func (s *SPIRE) GenerateJoinToken(ctx context.Context) (string, error) {
	out, err := s.CLI(ctx, "token generate", "-output", "json")
	if err != nil {
		return "", err
	}
	var resp struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.Value == "" {
		return "", fmt.Errorf("decode token generate output %q: %v", out, err)
	}
	return resp.Value, nil
}
