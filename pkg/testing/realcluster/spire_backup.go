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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sqliteFiles matches the sqlite datastore and the journal files next to it (-wal, -shm):
// after a crash the last transactions may be only in the write-ahead log, so a file copy
// takes them all.
const sqliteFiles = "datastore.sqlite3*"

// DatastoreBackup is a copy of a stopped SPIRE server's datastore, taken by Backup and put
// back by Restore.
type DatastoreBackup struct {
	// sqlite holds the datastore's files by name; pgDump is a pg_dump archive.
	sqlite map[string][]byte
	pgDump []byte
}

// Backup copies the datastore of the stopped server (Kill it first), as an operator's backup
// does: the sqlite files, or pg_dump's archive of its PostgreSQL database. A server whose
// database was given as SPIREOptions.PostgresConnectionString cannot be backed up: the
// harness does not know its cluster.
func (s *SPIRE) Backup(ctx context.Context) (*DatastoreBackup, error) {
	if s.proc.running() {
		return nil, errors.New("back up spire-server's datastore: the server is running")
	}
	if s.postgres != "" {
		database, err := s.postgresDatabase()
		if err != nil {
			return nil, err
		}
		dump, err := s.pg.Dump(ctx, database)
		if err != nil {
			return nil, err
		}
		return &DatastoreBackup{pgDump: dump}, nil
	}
	paths, err := filepath.Glob(filepath.Join(s.dir, "data", sqliteFiles))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("back up spire-server's datastore: no %s in %s", sqliteFiles, filepath.Join(s.dir, "data"))
	}
	b := &DatastoreBackup{sqlite: map[string][]byte{}}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("back up spire-server's datastore: %w", err)
		}
		b.sqlite[filepath.Base(p)] = data
	}
	return b, nil
}

// Restore replaces the datastore of the stopped server with b, which Backup took of this
// server; Restart then brings the server up on it.
func (s *SPIRE) Restore(ctx context.Context, b *DatastoreBackup) error {
	if s.proc.running() {
		return errors.New("restore spire-server's datastore: the server is running")
	}
	if s.postgres != "" {
		if b.pgDump == nil {
			return errors.New("restore spire-server's datastore: the backup is not of a PostgreSQL datastore")
		}
		database, err := s.postgresDatabase()
		if err != nil {
			return err
		}
		return s.pg.Restore(ctx, database, b.pgDump)
	}
	if b.sqlite == nil {
		return errors.New("restore spire-server's datastore: the backup is not of a sqlite datastore")
	}
	dir := filepath.Join(s.dir, "data")
	current, err := filepath.Glob(filepath.Join(dir, sqliteFiles))
	if err != nil {
		return err
	}
	// The journal of the datastore being replaced must go too: sqlite would apply it to the
	// restored file.
	for _, p := range current {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("restore spire-server's datastore: %w", err)
		}
	}
	for name, data := range b.sqlite {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("restore spire-server's datastore: %w", err)
		}
	}
	return nil
}

// postgresDatabase is the name of the server's PostgreSQL database, on the cluster StartSPIRE
// created it in.
func (s *SPIRE) postgresDatabase() (string, error) {
	if s.pg == nil {
		return "", errors.New("spire-server's PostgreSQL database was given by connection string: its cluster is unknown")
	}
	for _, field := range strings.Fields(s.postgres) {
		if name, ok := strings.CutPrefix(field, "dbname="); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("no dbname in connection string %q", s.postgres)
}
