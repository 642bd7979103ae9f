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
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// DefaultTrustDomain is the trust domain StartSPIRE uses unless told otherwise.
	DefaultTrustDomain = "example.org"

	// maxSocketPath keeps the API socket path below the 107-byte limit of
	// sun_path, with room for the server's own suffixes.
	maxSocketPath = 100

	spireReadyTimeout = 60 * time.Second
	spireStopGrace    = 10 * time.Second
	cliTimeout        = 30 * time.Second
)

// SPIREOptions configures StartSPIRE.
type SPIREOptions struct {
	// Dir holds the config, the sqlite datastore and the log. If empty, a
	// temporary directory is used and removed by Stop. A sqlite datastore
	// already in Dir is reused.
	Dir string
	// TrustDomain defaults to DefaultTrustDomain.
	TrustDomain string
	// LogLevel is DEBUG, INFO, WARN or ERROR; default INFO.
	LogLevel string
	// Logf receives progress messages (binary builds, start-up). Optional.
	Logf Logf
	// Postgres, if set, keeps the datastore in a new database of its own on
	// this PostgreSQL cluster instead of sqlite.
	Postgres *Postgres
	// PostgresConnectionString, if set, keeps the datastore in this
	// PostgreSQL database instead of sqlite. Servers given the same string
	// share one datastore, as the replicas of a SPIRE deployment do; see
	// SPIRE.PostgresConnectionString. Excludes Postgres.
	PostgresConnectionString string
	// AdminIDs are SPIFFE IDs the server grants its admin API to over TCP (admin_ids), as
	// to callers of its admin socket.
	AdminIDs []string
	// AuditLog turns on the server's audit log (audit_log_enabled): one line per API call in
	// the server's log, naming, for an admin-socket caller, its binary (caller_path).
	AuditLog bool
	// CATTL is the lifetime of the server's own X.509 CA (ca_ttl); 0 keeps SPIRE's default of
	// 24h. SPIRE prepares the next authority at half of it and activates it at five sixths,
	// and caps whatever it signs, SVIDs and downstream CAs alike, at the active CA's expiry:
	// a CATTL of minutes makes CA rotation, and everything capped by it, watchable in a test.
	// Below 6×default_x509_svid_ttl (6h with the default 1h) SPIRE starts with a warning
	// that SVIDs may be shorter than their TTL; that is the capping, and expected.
	CATTL time.Duration
	// DiskKeyManager keeps the server's CA keys in a file in Dir (the disk key manager)
	// instead of in memory, so that Restart brings the server back with the CA it had, as a
	// deployment with the disk key manager or a KMS comes back after a crash. With the
	// default in-memory keys a restarted server mints a new root that no agent trusts yet:
	// an agent started before then fails its next sync and exits.
	DiskKeyManager bool
}

// SPIRE is a running spire-server on 127.0.0.1 with a sqlite or PostgreSQL
// datastore, an in-memory key manager (each server has CA keys of its own,
// even on a shared datastore; SPIREOptions.DiskKeyManager keeps them in a
// file) and the join_token node attestor. Its API is
// served on a unix socket without authentication, as the local admin socket is.
type SPIRE struct {
	bin         string
	dir         string
	socketDir   string
	ownedDirs   []string
	socketPath  string
	trustDomain string
	bindPort    int
	metricsPort int
	// postgres is the datastore's connection string, empty for sqlite.
	postgres string
	// pg is the cluster of that database when StartSPIRE created it (SPIREOptions.Postgres).
	pg       *Postgres
	adminIDs []string
	auditLog bool
	caTTL    time.Duration
	diskKeys bool
	logf     Logf
	proc     *process

	mu      sync.Mutex
	stopped bool
}

// StartSPIRE writes a spire-server config, starts the server and waits until
// `spire-server healthcheck` passes and the Prometheus endpoint answers.
func StartSPIRE(ctx context.Context, opts SPIREOptions) (*SPIRE, error) {
	if opts.Postgres != nil && opts.PostgresConnectionString != "" {
		return nil, errors.New("set either Postgres or PostgresConnectionString, not both")
	}
	bin, err := Binary(ctx, opts.Logf, SPIREServer)
	if err != nil {
		return nil, err
	}
	s := &SPIRE{bin: bin, trustDomain: opts.TrustDomain, postgres: opts.PostgresConnectionString, adminIDs: opts.AdminIDs, auditLog: opts.AuditLog, caTTL: opts.CATTL, diskKeys: opts.DiskKeyManager, logf: opts.Logf}
	if opts.CATTL < 0 {
		return nil, fmt.Errorf("negative CA TTL %s", opts.CATTL)
	}
	if opts.Postgres != nil {
		s.pg = opts.Postgres
		if s.postgres, err = opts.Postgres.NewDatabase(ctx); err != nil {
			return nil, err
		}
	}
	if s.trustDomain == "" {
		s.trustDomain = DefaultTrustDomain
	}
	logLevel := opts.LogLevel
	if logLevel == "" {
		logLevel = "INFO"
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Stop()
		}
	}()
	if opts.Dir == "" {
		// os.MkdirTemp("", ...) rather than a test's TempDir: short enough for the socket.
		if s.dir, err = os.MkdirTemp("", "spire-"); err != nil {
			return nil, fmt.Errorf("create spire dir: %w", err)
		}
		s.ownedDirs = append(s.ownedDirs, s.dir)
	} else {
		if s.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("resolve spire dir: %w", err)
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("create spire dir: %w", err)
		}
	}
	s.socketDir = s.dir
	if len(filepath.Join(s.dir, "api.sock")) > maxSocketPath {
		if s.socketDir, err = os.MkdirTemp("", "spire-sock-"); err != nil {
			return nil, fmt.Errorf("create spire socket dir: %w", err)
		}
		s.ownedDirs = append(s.ownedDirs, s.socketDir)
	}
	s.socketPath = filepath.Join(s.socketDir, "api.sock")

	err = startOnFreePorts("spire-server", func() (*process, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		s.bindPort, s.metricsPort = ports[0], ports[1]
		if err := s.writeConfig(logLevel); err != nil {
			return nil, err
		}
		s.proc = newProcess(SPIREServer, bin, filepath.Join(s.dir, "spire-server.log"), "run", "-config", s.configPath())
		s.logf.printf("realcluster: starting %s for %s on %s", SPIREServer, s.trustDomain, s.socketPath)
		return s.proc, s.proc.start()
	}, func() error { return s.waitReady(ctx) })
	if err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// NewSPIRE starts a SPIRE server for a test and stops it in t.Cleanup; it
// fails the test if start-up fails. On test failure the log's tail is logged.
func NewSPIRE(t testing.TB, opts SPIREOptions) *SPIRE {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	start := time.Now()
	s, err := StartSPIRE(t.Context(), opts)
	if err != nil {
		t.Fatalf("start spire-server: %v", err)
	}
	t.Logf("realcluster: spire-server ready on %s in %s", s.socketPath, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", s.proc.logTail(logTailLines))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop spire-server: %v", err)
		}
	})
	return s
}

func (s *SPIRE) configPath() string { return filepath.Join(s.dir, "server.conf") }

func (s *SPIRE) writeConfig(logLevel string) error {
	q := strconv.Quote
	databaseType, connectionString := "sqlite3", filepath.Join(s.dir, "data", "datastore.sqlite3")
	if s.postgres != "" {
		databaseType, connectionString = "postgres", s.postgres
	}
	adminIDs := make([]string, 0, len(s.adminIDs))
	for _, id := range s.adminIDs {
		adminIDs = append(adminIDs, q(id))
	}
	keyManager := `KeyManager "memory" {
        plugin_data {}
    }`
	if s.diskKeys {
		keyManager = fmt.Sprintf(`KeyManager "disk" {
        plugin_data {
            keys_path = %s
        }
    }`, q(filepath.Join(s.dir, "data", "keys.json")))
	}
	caTTL := ""
	if s.caTTL > 0 {
		caTTL = "\n    ca_ttl = " + q(s.caTTL.String())
	}
	conf := fmt.Sprintf(`server {
    bind_address = "127.0.0.1"
    bind_port = "%d"
    socket_path = %s
    trust_domain = %s
    data_dir = %s
    log_level = %s
    admin_ids = [%s]
    audit_log_enabled = %t%s
}

plugins {
    DataStore "sql" {
        plugin_data {
            database_type = %s
            connection_string = %s
        }
    }

    %s

    NodeAttestor "join_token" {
        plugin_data {}
    }
}

telemetry {
    Prometheus {
        host = "127.0.0.1"
        port = %d
    }
}
`, s.bindPort, q(s.socketPath), q(s.trustDomain), q(filepath.Join(s.dir, "data")), q(logLevel),
		strings.Join(adminIDs, ", "), s.auditLog, caTTL, q(databaseType), q(connectionString), keyManager, s.metricsPort)
	if err := os.WriteFile(s.configPath(), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("write spire-server config: %w", err)
	}
	return nil
}

// waitReady polls the healthcheck CLI and the metrics endpoint, failing early
// if the server exits.
func (s *SPIRE) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, spireReadyTimeout)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !s.proc.running() {
			return false, s.proc.exitErr()
		}
		if _, err := os.Stat(s.socketPath); err != nil {
			last = "no API socket yet"
			return false, nil
		}
		if out, err := s.CLI(ctx, "healthcheck"); err != nil {
			last = strings.TrimSpace(string(out) + " " + err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if !s.proc.running() {
			return s.proc.exitErr()
		}
		return fmt.Errorf("wait for spire-server healthcheck (last: %s): %w\n%s", last, err, s.proc.logTail(logTailLines))
	}
	// The exporter starts with the server; a short wait covers the race.
	return waitHTTPReady(ctx, s.proc, spireReadyTimeout, &http.Client{Timeout: 2 * time.Second}, s.MetricsURL())
}

// SocketPath returns the path of the server API unix socket.
func (s *SPIRE) SocketPath() string { return s.socketPath }

// TrustDomain returns the server's trust domain name, e.g. "example.org".
func (s *SPIRE) TrustDomain() string { return s.trustDomain }

// MetricsURL returns the Prometheus scrape URL.
func (s *SPIRE) MetricsURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(s.metricsPort) + "/metrics"
}

// Address returns the host:port of the server's TCP (agent and bundle) API.
func (s *SPIRE) Address() string { return "127.0.0.1:" + strconv.Itoa(s.bindPort) }

// Dir returns the directory holding the config, datastore and log.
func (s *SPIRE) Dir() string { return s.dir }

// PostgresConnectionString returns the connection string of the server's
// PostgreSQL datastore, or "" if it runs on sqlite. Pass it to a second
// StartSPIRE to run two servers on one datastore.
func (s *SPIRE) PostgresConnectionString() string { return s.postgres }

// Version returns what `spire-server --version` prints, e.g. "1.15.3".
func (s *SPIRE) Version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	// The CLI prints its version on standard error.
	out, err := exec.CommandContext(ctx, s.bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", s.bin, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Freeze stops the server (SIGSTOP) with its sockets open: calls in flight and new ones wait,
// as on a server that hangs, until Thaw.
func (s *SPIRE) Freeze() error { return s.proc.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (s *SPIRE) Thaw() error { return s.proc.signal(syscall.SIGCONT) }

// Log returns the server's whole log, every start of it.
func (s *SPIRE) Log() (string, error) {
	b, err := os.ReadFile(s.proc.logPath)
	return string(b), err
}

// LogTail returns the last n lines of the server log, for failure reports.
func (s *SPIRE) LogTail(n int) string { return s.proc.logTail(n) }

// Kill sends SIGKILL to the server, simulating a crash, and waits for it to
// exit. The datastore is kept: Restart brings the server back.
func (s *SPIRE) Kill() {
	s.proc.kill()
}

// Restart stops the server if it runs (SIGTERM, then SIGKILL after a grace
// period) and starts it again with the same config, socket and datastore, so
// registration entries survive. The in-memory key manager forgets its keys:
// the server mints a new CA, unless SPIREOptions.DiskKeyManager kept them.
func (s *SPIRE) Restart(ctx context.Context) error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return errors.New("spire-server has been stopped")
	}
	s.proc.stop(spireStopGrace)
	if err := s.proc.start(); err != nil {
		return err
	}
	if err := s.waitReady(ctx); err != nil {
		return fmt.Errorf("restart spire-server: %w", err)
	}
	return nil
}

// Stop stops the server and removes the directories StartSPIRE created. It
// is safe to call more than once.
func (s *SPIRE) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	if s.proc != nil {
		s.proc.stop(spireStopGrace)
	}
	var errs []error
	for _, dir := range s.ownedDirs {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// CLI runs `spire-server <command> -socketPath <socket> <flags...>`, where
// command is one or more words such as "entry show", and returns its
// standard output. On failure the error carries standard error too.
func (s *SPIRE) CLI(ctx context.Context, command string, flags ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	args := append(strings.Fields(command), "-socketPath", s.socketPath)
	args = append(args, flags...)
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("spire-server %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	return stdout.Bytes(), nil
}
