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
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// PostgresSuperuser is the database role initdb creates; every
	// connection uses it, without a password (trust authentication on loopback).
	PostgresSuperuser = "postgres"

	// postgresRoot is where Debian's postgresql package installs each major
	// version's binaries, as <version>/bin.
	postgresRoot = "/usr/lib/postgresql"
	// postgresOSUser runs initdb and postgres when we are root: both refuse
	// root. The Debian package creates this user.
	postgresOSUser = "postgres"

	postgresReadyTimeout = 60 * time.Second
	postgresStopGrace    = 15 * time.Second
	postgresCmdTimeout   = 60 * time.Second
)

// PostgresOptions configures StartPostgres.
type PostgresOptions struct {
	// Logf receives progress messages. Optional.
	Logf Logf
}

// Postgres is a private PostgreSQL cluster, initdb'd in a temporary
// directory and served on 127.0.0.1 with trust authentication, durability
// traded for speed (fsync off). Create databases in it with CreateDatabase or
// NewDatabase.
type Postgres struct {
	binDir     string
	dir        string // data/, the log and the unix socket
	port       int
	credential *syscall.Credential // nil unless we run as root
	logf       Logf
	proc       *process

	mu      sync.Mutex
	nextDB  int
	stopped bool
}

// PostgresBinDir returns the bin directory of the newest PostgreSQL under
// /usr/lib/postgresql, or an error saying how to install one.
func PostgresBinDir() (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(postgresRoot, "*", "bin", "postgres"))
	best, bestVersion := "", -1.0
	for _, p := range dirs {
		version, err := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(p))), 64)
		if err != nil {
			continue
		}
		if version > bestVersion {
			best, bestVersion = filepath.Dir(p), version
		}
	}
	if best == "" {
		return "", fmt.Errorf("no PostgreSQL under %s: apt-get install postgresql is needed", postgresRoot)
	}
	return best, nil
}

// StartPostgres initdb's a cluster in a new temporary directory and starts
// postgres on a free loopback port. Run as root, initdb and postgres run as
// the postgres system user, which owns the directory. The caller must call
// Stop on success; on failure StartPostgres has already cleaned up.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	binDir, err := PostgresBinDir()
	if err != nil {
		return nil, err
	}
	p := &Postgres{binDir: binDir, logf: opts.Logf}
	if p.credential, err = postgresCredential(); err != nil {
		return nil, err
	}
	// Directly under the temp root, not in a test's TempDir: the postgres user
	// must be able to reach it, and the socket path must stay short.
	if p.dir, err = os.MkdirTemp("", "realcluster-pg-"); err != nil {
		return nil, fmt.Errorf("create postgres dir: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = p.Stop()
		}
	}()
	if p.credential != nil {
		if err := os.Chown(p.dir, int(p.credential.Uid), int(p.credential.Gid)); err != nil {
			return nil, fmt.Errorf("hand %s to the %s user: %w", p.dir, postgresOSUser, err)
		}
	}
	start := time.Now()
	if out, err := p.run(ctx, "initdb", "--pgdata="+p.dataDir(), "--username="+PostgresSuperuser,
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	p.logf.printf("realcluster: initdb of a PostgreSQL cluster in %s took %s", p.dir, time.Since(start).Round(time.Millisecond))

	err = startOnFreePorts("postgres", func() (*process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		p.port = ports[0]
		p.proc = newProcess("postgres", filepath.Join(binDir, "postgres"), filepath.Join(p.dir, "postgres.log"),
			"-D", p.dataDir(),
			"-p", strconv.Itoa(p.port),
			"-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories="+p.dir,
			// Test data need not survive a crash.
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			// Several SPIRE servers with their connection pools share one cluster.
			"-c", "max_connections=300",
		)
		p.proc.credential = p.credential
		p.logf.printf("realcluster: starting postgres on 127.0.0.1:%d", p.port)
		return p.proc, p.proc.start()
	}, func() error { return p.waitReady(ctx) })
	if err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// NewPostgres starts a Postgres for a test and stops it in t.Cleanup; it
// fails the test if start-up fails. On test failure the log's tail is logged.
func NewPostgres(t testing.TB, opts PostgresOptions) *Postgres {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	start := time.Now()
	p, err := StartPostgres(t.Context(), opts)
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	t.Logf("realcluster: postgres ready on 127.0.0.1:%d in %s", p.port, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", p.proc.logTail(logTailLines))
		}
		if err := p.Stop(); err != nil {
			t.Errorf("stop postgres: %v", err)
		}
	})
	return p
}

// postgresCredential returns the user to run the server as: nil (ourselves)
// unless we are root, then the postgres system user.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(postgresOSUser)
	if err != nil {
		return nil, fmt.Errorf("postgres refuses to run as root and there is no %s user to run it as (apt-get install postgresql creates one): %w", postgresOSUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of %s: %w", postgresOSUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of %s: %w", postgresOSUser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (p *Postgres) dataDir() string { return filepath.Join(p.dir, "data") }

// run runs one of the PostgreSQL programs to completion as the server's user
// and returns its combined output.
func (p *Postgres) run(ctx context.Context, program string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, postgresCmdTimeout)
	defer cancel()
	return p.command(ctx, program, args...).CombinedOutput()
}

// command prepares one of the PostgreSQL programs to run as the server's user.
func (p *Postgres) command(ctx context.Context, program string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(p.binDir, program), args...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.credential}
	return cmd
}

// Dump backs the named database up as an operator's backup job does: pg_dump's archive in
// its custom format, for Restore.
func (p *Postgres) Dump(ctx context.Context, database string) ([]byte, error) {
	if !databaseName.MatchString(database) {
		return nil, fmt.Errorf("database name %q: want lower-case letters, digits and underscores", database)
	}
	ctx, cancel := context.WithTimeout(ctx, postgresCmdTimeout)
	defer cancel()
	var out, stderr bytes.Buffer
	cmd := p.command(ctx, "pg_dump", "--host=127.0.0.1", "--port="+strconv.Itoa(p.port), "--username="+PostgresSuperuser,
		"--format=custom", "--dbname="+database)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pg_dump %s: %w: %s", database, err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}

// Restore replaces the named database with an archive of Dump: it drops the database,
// disconnecting whoever is still connected, creates it empty and pg_restore's the archive
// into it.
func (p *Postgres) Restore(ctx context.Context, database string, dump []byte) error {
	if !databaseName.MatchString(database) {
		return fmt.Errorf("database name %q: want lower-case letters, digits and underscores", database)
	}
	if _, err := p.Query(ctx, "postgres", "DROP DATABASE IF EXISTS "+database+" WITH (FORCE)"); err != nil {
		return err
	}
	if err := p.CreateDatabase(ctx, database); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, postgresCmdTimeout)
	defer cancel()
	cmd := p.command(ctx, "pg_restore", "--host=127.0.0.1", "--port="+strconv.Itoa(p.port), "--username="+PostgresSuperuser,
		"--exit-on-error", "--no-owner", "--dbname="+database)
	cmd.Stdin = bytes.NewReader(dump)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_restore %s: %w: %s", database, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitReady polls pg_isready, failing early if postgres exits.
func (p *Postgres) waitReady(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, readyPollInterval, postgresReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if !p.proc.running() {
			return false, p.proc.exitErr()
		}
		out, err := p.run(ctx, "pg_isready", "--host=127.0.0.1", "--port="+strconv.Itoa(p.port), "--username="+PostgresSuperuser, "--dbname=postgres")
		if err != nil {
			last = strings.TrimSpace(string(out) + " " + err.Error())
			return false, nil
		}
		return true, nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("wait for postgres (last: %s): %w\n%s", last, err, p.proc.logTail(logTailLines))
	}
	return err
}

// databaseName is what CreateDatabase accepts: plain identifiers that need
// no quoting anywhere.
var databaseName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// CreateDatabase creates an empty database.
func (p *Postgres) CreateDatabase(ctx context.Context, name string) error {
	if !databaseName.MatchString(name) {
		return fmt.Errorf("database name %q: want lower-case letters, digits and underscores", name)
	}
	out, err := p.run(ctx, "createdb", "--host=127.0.0.1", "--port="+strconv.Itoa(p.port), "--username="+PostgresSuperuser, name)
	if err != nil {
		return fmt.Errorf("create database %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NewDatabase creates an empty database with a name not used before in
// this cluster and returns its connection string.
func (p *Postgres) NewDatabase(ctx context.Context) (string, error) {
	p.mu.Lock()
	p.nextDB++
	name := fmt.Sprintf("db%d", p.nextDB)
	p.mu.Unlock()
	if err := p.CreateDatabase(ctx, name); err != nil {
		return "", err
	}
	return p.ConnectionString(name), nil
}

// ConnectionString returns a libpq key=value connection string for the
// named database, as SPIRE's sql datastore takes it.
func (p *Postgres) ConnectionString(database string) string {
	return fmt.Sprintf("dbname=%s host=127.0.0.1 port=%d user=%s sslmode=disable", database, p.port, PostgresSuperuser)
}

// Query runs one SQL statement through psql in the named database and
// returns its rows unaligned, one per line, fields separated by |.
func (p *Postgres) Query(ctx context.Context, database, sql string) (string, error) {
	out, err := p.run(ctx, "psql", "--host=127.0.0.1", "--port="+strconv.Itoa(p.port), "--username="+PostgresSuperuser,
		"--dbname="+database, "--no-psqlrc", "--tuples-only", "--no-align", "--set=ON_ERROR_STOP=1", "--command="+sql)
	if err != nil {
		return "", fmt.Errorf("psql %q: %w: %s", sql, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// Databases lists the databases other than the templates and "postgres".
func (p *Postgres) Databases(ctx context.Context) ([]string, error) {
	out, err := p.Query(ctx, "postgres", "SELECT datname FROM pg_database WHERE NOT datistemplate AND datname <> 'postgres'")
	if err != nil {
		return nil, err
	}
	names := strings.Fields(out)
	sort.Strings(names)
	return names, nil
}

// Port returns the TCP port postgres listens on at 127.0.0.1.
func (p *Postgres) Port() int { return p.port }

// LogTail returns the last n lines of the server log, for failure reports.
func (p *Postgres) LogTail(n int) string { return p.proc.logTail(n) }

// Stop shuts postgres down (fast shutdown: SIGINT, then SIGKILL after a
// grace period) and removes its directory. It is safe to call more than once.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	p.mu.Unlock()
	if p.proc != nil {
		// SIGTERM would be a smart shutdown, which waits for clients to leave.
		p.proc.signalAndWait(syscall.SIGINT, postgresStopGrace)
	}
	if p.dir != "" {
		if err := os.RemoveAll(p.dir); err != nil {
			return fmt.Errorf("remove postgres dir: %w", err)
		}
	}
	return nil
}
