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

package app_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/static"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// pollGate holds a static source's poller between two polls, so that a test can change files
// knowing which poll reads what.
type pollGate struct {
	mu      sync.Mutex
	holding bool
	held    chan map[string][]byte
	release chan struct{}
	stop    chan struct{}
}

func newPollGate() *pollGate {
	return &pollGate{held: make(chan map[string][]byte), release: make(chan struct{}), stop: make(chan struct{})}
}

// hook is the source's poll hook: while holding, it hands what the poll read to the test and
// waits for it to let the poller go.
func (g *pollGate) hook(contents map[string][]byte) {
	g.mu.Lock()
	holding := g.holding
	g.mu.Unlock()
	if !holding {
		return
	}
	select {
	case g.held <- contents:
	case <-g.stop:
		return
	}
	select {
	case <-g.release:
	case <-g.stop:
	}
}

// pause returns once the poller is held after a poll, with what that poll read.
func (g *pollGate) pause() map[string][]byte {
	g.mu.Lock()
	g.holding = true
	g.mu.Unlock()
	return <-g.held
}

// next lets the held poller go and returns once it is held again after its next poll, with
// what that poll read. Polls are at least one poll interval apart.
func (g *pollGate) next() map[string][]byte {
	g.release <- struct{}{}
	return <-g.held
}

// resume lets the poller go for good.
func (g *pollGate) resume() {
	g.mu.Lock()
	g.holding = false
	g.mu.Unlock()
	g.release <- struct{}{}
}

func staticEntry(name, spiffeID string, selectors []string, dnsNames ...string) string {
	s := fmt.Sprintf("apiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterStaticEntry\nmetadata:\n  name: %s\nspec:\n"+
		"  spiffeID: %s\n  parentID: spiffe://example.org/spire/server\n  selectors:\n  - %s\n",
		name, spiffeID, strings.Join(selectors, "\n  - "))
	if len(dnsNames) > 0 {
		s += "  dnsNames: [" + strings.Join(dnsNames, ", ") + "]\n"
	}
	return s
}

// spireEntry is what a user checks of an entry: which one it is and whom it is for.
type spireEntry struct {
	ID        string
	Selectors []string
	DNSNames  []string
}

// TestStaticModeNeverAppliesAHalfWrittenFile runs static mode against the real spire-server
// and rewrites manifest files in place, as `cat > file` or an editor that truncates does,
// stopping halfway with the source's poller held right after it read the half: a YAML stream
// cut after its first document, an entry cut in the middle of its selectors, an emptied file
// read by two polls a poll interval apart. SPIRE must keep exactly the entries it had, with
// the same IDs and selectors, then converge to the whole new content once it is written.
//
// Each rewrite also removes a barrier file declaring one more ClusterStaticEntry whose name
// sorts last. Removing a file applies at once, and ClusterStaticEntries are synced by one
// worker in the order of their events, so once the barrier's entry is gone from SPIRE,
// whatever the held poll applied of the half-written file is in SPIRE too.
func TestStaticModeNeverAppliesAHalfWrittenFile(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real spire-server")
	}
	spire := realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	selectorsOf := func(uid string) []string { return []string{"unix:uid:" + uid} }
	abc := staticEntry("a", "spiffe://example.org/a", selectorsOf("1")) + "---\n" +
		staticEntry("b", "spiffe://example.org/b", selectorsOf("2")) + "---\n" +
		staticEntry("c", "spiffe://example.org/c", selectorsOf("3"))
	write("entries.yaml", abc)
	write("db.yaml", staticEntry("db", "spiffe://example.org/db", []string{"unix:uid:999", "unix:gid:999"}))
	barriers := []string{"zz-barrier-1", "zz-barrier-2", "zz-barrier-3"}
	for _, b := range barriers {
		write(b+".yaml", staticEntry(b, "spiffe://example.org/"+b, selectorsOf("0")))
	}

	cfg, err := config.Parse([]byte("trustDomain: example.org\nspireServerSocketPath: " + spire.SocketPath() +
		"\nstaticManifestPath: " + dir + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	spireClient, err := app.DialSPIRE(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = spireClient.Close() }()
	source, err := static.NewSource(ctx, dir, static.Options{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gate := newPollGate()
	source.SetPollHook(gate.hook)
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- app.RunStatic(runCtx, app.ControllerContext{Config: cfg, SPIRE: spireClient, StaticSource: source}, 1, nil)
	}()
	defer func() {
		close(gate.stop)
		stopRun()
		if err := <-done; err != nil {
			t.Errorf("RunStatic: %v", err)
		}
	}()

	entries := func(t *testing.T) map[string]spireEntry {
		t.Helper()
		all, err := spire.EntryShow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]spireEntry{}
		for _, e := range all {
			var selectors []string
			for _, s := range e.Selectors {
				selectors = append(selectors, s.String())
			}
			slices.Sort(selectors)
			got[e.SPIFFEID] = spireEntry{ID: e.ID, Selectors: selectors, DNSNames: e.DNSNames}
		}
		return got
	}
	waitFor := func(t *testing.T, what string, cond func(map[string]spireEntry) bool) {
		t.Helper()
		var last []realcluster.Entry
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			var err error
			if last, err = spire.EntryShow(ctx); err != nil {
				return false, nil
			}
			return cond(entries(t)), nil
		}); err != nil {
			t.Fatalf("%s: not after a minute; SPIRE holds %+v", what, last)
		}
	}
	// holds checks that SPIRE holds exactly want, IDs included.
	holds := func(t *testing.T, what string, want map[string]spireEntry) {
		t.Helper()
		if diff := cmp.Diff(want, entries(t), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: SPIRE (-want +got):\n%s", what, diff)
		}
	}
	// halfWrite rewrites name with content in place, stopping after cut while polls polls
	// read the half and the barrier is removed; it checks that SPIRE still holds what it held
	// before, then writes the rest, lets the poller go and returns what SPIRE held before.
	halfWrite := func(t *testing.T, name, content, cut, barrier string, polls int) map[string]spireEntry {
		t.Helper()
		half := content[:strings.Index(content, cut)+len(cut)]
		gate.pause()
		before := entries(t)
		delete(before, "spiffe://example.org/"+barrier)
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Written in full and the poller let go even when a check fails.
		defer func() {
			_, err := f.WriteString(content[len(half):])
			if err := errors.Join(err, f.Close()); err != nil {
				t.Error(err)
			}
			gate.resume()
		}()
		if _, err := f.WriteString(half); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, barrier+".yaml")); err != nil {
			t.Fatal(err)
		}
		for range polls {
			if read := gate.next(); string(read[name]) != half {
				t.Fatalf("the poll read %q from %s, want the half %q", read[name], name, half)
			}
		}
		waitFor(t, barrier+" deleted", func(got map[string]spireEntry) bool {
			_, ok := got["spiffe://example.org/"+barrier]
			return !ok
		})
		holds(t, "while half written", before)
		return before
	}

	waitFor(t, "every manifest in SPIRE", func(got map[string]spireEntry) bool { return len(got) == 4+len(barriers) })
	abcd := staticEntry("a", "spiffe://example.org/a", selectorsOf("1")) + "---\n" +
		staticEntry("b", "spiffe://example.org/b", selectorsOf("2")) + "---\n" +
		staticEntry("c", "spiffe://example.org/c", selectorsOf("3"), "c.example.org") + "---\n" +
		staticEntry("d", "spiffe://example.org/d", selectorsOf("4"))

	t.Run("stream cut after its first document", func(t *testing.T) {
		// Applied, the half would delete b and c.
		want := halfWrite(t, "entries.yaml", abcd, "---\n", barriers[0], 1)
		waitFor(t, "the whole stream applied", func(got map[string]spireEntry) bool {
			return got["spiffe://example.org/d"].ID != "" && len(got["spiffe://example.org/c"].DNSNames) == 1
		})
		c := want["spiffe://example.org/c"]
		c.DNSNames = []string{"c.example.org"}
		want["spiffe://example.org/c"] = c
		want["spiffe://example.org/d"] = spireEntry{ID: entries(t)["spiffe://example.org/d"].ID, Selectors: selectorsOf("4")}
		holds(t, "the whole stream applied, a, b and c never replaced", want)
	})

	t.Run("selectors cut short", func(t *testing.T) {
		// Applied, the half would grant db's identity to every process of uid 999.
		db := staticEntry("db", "spiffe://example.org/db", []string{"unix:uid:999", "unix:gid:999", "unix:path:/usr/bin/db"})
		want := halfWrite(t, "db.yaml", db, "unix:uid:999\n", barriers[1], 1)
		waitFor(t, "the whole entry applied", func(got map[string]spireEntry) bool {
			return len(got["spiffe://example.org/db"].Selectors) == 3
		})
		want["spiffe://example.org/db"] = spireEntry{ID: entries(t)["spiffe://example.org/db"].ID,
			Selectors: []string{"unix:gid:999", "unix:path:/usr/bin/db", "unix:uid:999"}}
		holds(t, "the whole entry applied", want)
	})

	t.Run("emptied file read by two polls", func(t *testing.T) {
		// As while a generator writing through > has not output anything yet. Applied, the
		// empty file would delete a, b, c and d.
		want := halfWrite(t, "entries.yaml", abcd, "", barriers[2], 2)
		// The same content again: nothing to write. The source has read it once the poller
		// was held again.
		gate.pause()
		gate.resume()
		holds(t, "the same stream rewritten, nothing replaced", want)
	})
}
