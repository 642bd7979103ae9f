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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTwoSPIREServersOnOnePostgres runs two servers on one database, as the
// replicas of a SPIRE deployment run, and a third on a database of its own.
func TestTwoSPIREServersOnOnePostgres(t *testing.T) {
	skipIfShort(t)
	ctx := t.Context()
	pg := NewPostgres(t, PostgresOptions{})

	start := time.Now()
	first := NewSPIRE(t, SPIREOptions{Postgres: pg})
	firstStart := time.Since(start)
	start = time.Now()
	second := NewSPIRE(t, SPIREOptions{PostgresConnectionString: first.PostgresConnectionString()})
	t.Logf("start-up on PostgreSQL: first spire-server %s, second on the same database %s",
		firstStart.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	alone := NewSPIRE(t, SPIREOptions{Postgres: pg})

	if first.SocketPath() == second.SocketPath() || first.Address() == second.Address() || first.MetricsURL() == second.MetricsURL() {
		t.Fatalf("servers share an endpoint: %s %s %s / %s %s %s",
			first.SocketPath(), first.Address(), first.MetricsURL(), second.SocketPath(), second.Address(), second.MetricsURL())
	}
	if alone.PostgresConnectionString() == first.PostgresConnectionString() {
		t.Fatalf("a server given Postgres reuses database %q", alone.PostgresConnectionString())
	}

	created, err := first.CreateEntryCLI(ctx, EntrySpec{
		SPIFFEID:   "spiffe://example.org/ns/apps/sa/web",
		ParentID:   "spiffe://example.org/spire/agent/k8s_psat/demo/node-a",
		Selectors:  []string{"k8s:ns:apps", "k8s:sa:web"},
		ExtraFlags: []string{"-dns", "web.apps.svc"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The entry is in PostgreSQL, not in some sqlite file.
	if n, err := pg.Query(ctx, databaseOf(first.PostgresConnectionString()), "SELECT count(*) FROM registered_entries"); err != nil || n != "1" {
		t.Fatalf("rows in registered_entries: %q, %v; want 1", n, err)
	}
	seen, err := second.EntryShow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Entry{created}, seen); diff != "" {
		t.Fatalf("entries through the second server (-created by the first +seen):\n%s", diff)
	}
	if other, err := alone.EntryShow(ctx); err != nil || len(other) != 0 {
		t.Fatalf("entries on a server with its own database: %+v, %v", other, err)
	}

	if err := second.DeleteEntryCLI(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if left, err := first.EntryShow(ctx); err != nil || len(left) != 0 {
		t.Fatalf("entries through the first server after the second deleted it: %+v, %v", left, err)
	}
}

// databaseOf returns the dbname of a key=value connection string.
func databaseOf(connectionString string) string {
	for _, kv := range strings.Fields(connectionString) {
		if name, ok := strings.CutPrefix(kv, "dbname="); ok {
			return name
		}
	}
	return ""
}
