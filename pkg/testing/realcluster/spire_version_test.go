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
)

// TestSPIREServerVersion: the spire-server the tests run is the pinned release, and its CLI
// works against it.
func TestSPIREServerVersion(t *testing.T) {
	skipIfShort(t)
	ctx := t.Context()
	s := NewSPIRE(t, SPIREOptions{})
	version, err := s.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "1.15.3") {
		t.Fatalf("spire-server --version = %q, want 1.15.3", version)
	}
	created, err := s.CreateEntryCLI(ctx, EntrySpec{
		SPIFFEID:  "spiffe://example.org/ns/apps/sa/web",
		ParentID:  "spiffe://example.org/spire/agent/k8s_psat/demo/node-a",
		Selectors: []string{"k8s:ns:apps"},
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := s.EntryShow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].ID != created.ID {
		t.Fatalf("entries %+v, want just %s", entries, created.ID)
	}
}

func TestStartSPIRERejectsTwoDatastores(t *testing.T) {
	_, err := StartSPIRE(t.Context(), SPIREOptions{Postgres: &Postgres{}, PostgresConnectionString: "dbname=x"})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("got %v, want an error about two datastores", err)
	}
}
