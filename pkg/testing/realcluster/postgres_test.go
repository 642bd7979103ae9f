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
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real PostgreSQL; skipped with -short")
	}
	ctx := t.Context()
	pg, err := StartPostgres(ctx, PostgresOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	dir := pg.dir

	first, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatalf("NewDatabase returned %q twice", first)
	}
	if !strings.Contains(first, "host=127.0.0.1") || !strings.Contains(first, "sslmode=disable") {
		t.Fatalf("connection string %q", first)
	}
	if err := pg.CreateDatabase(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	if err := pg.CreateDatabase(ctx, "Robert'); DROP"); err == nil {
		t.Fatal("CreateDatabase accepted a name that needs quoting")
	}
	dbs, err := pg.Databases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"db1", "db2", "shared"}, dbs); diff != "" {
		t.Fatalf("databases (-want +got):\n%s", diff)
	}
	if _, err := pg.Query(ctx, "shared", "CREATE TABLE t (v text); INSERT INTO t VALUES ('a'), ('b')"); err != nil {
		t.Fatal(err)
	}
	got, err := pg.Query(ctx, "shared", "SELECT v FROM t ORDER BY v")
	if err != nil {
		t.Fatal(err)
	}
	if got != "a\nb" {
		t.Fatalf("rows %q, want a and b", got)
	}

	for range 2 {
		if err := pg.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if pg.proc.running() {
		t.Fatal("postgres still runs after Stop")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("postgres dir %s left behind: %v", dir, err)
	}
}
