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

package static

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

const settleInterval = 10 * time.Millisecond

// settleEnv is a source over a directory whose polls the test runs itself, on a fake clock.
type settleEnv struct {
	t      *testing.T
	dir    string
	source *Source
	clock  *clocktesting.FakePassiveClock
}

// newSettleEnv writes files, then starts a source over them without its poller.
func newSettleEnv(t *testing.T, files map[string]string) *settleEnv {
	t.Helper()
	return newSettleEnvWith(t, files, Options{})
}

// newSettleEnvWith is newSettleEnv with options; the poll interval is settleInterval.
func newSettleEnvWith(t *testing.T, files map[string]string, opts Options) *settleEnv {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		writeManifest(t, dir, name, content)
	}
	opts.PollInterval = settleInterval
	source, err := NewSource(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakePassiveClock(time.Now())
	source.clock = clock
	return &settleEnv{t: t, dir: dir, source: source, clock: clock}
}

// write writes a file in place, as `cat > file` does: whoever reads it meanwhile sees the
// content written so far.
func (e *settleEnv) write(name, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// pollAfter lets d pass, then polls once.
func (e *settleEnv) pollAfter(d time.Duration) {
	e.clock.SetTime(e.clock.Now().Add(d))
	e.source.poll(context.Background())
}

// served returns the ClusterStaticEntries served, name → selectors.
func (e *settleEnv) served() map[string][]string {
	e.source.mu.Lock()
	defer e.source.mu.Unlock()
	got := map[string][]string{}
	for name, s := range e.source.kinds[kindStaticEntry].objects {
		got[name] = s.obj.(*spirev1alpha1.ClusterStaticEntry).Spec.Selectors
	}
	return got
}

func (e *settleEnv) expect(what string, want map[string][]string) {
	e.t.Helper()
	if diff := cmp.Diff(want, e.served()); diff != "" {
		e.t.Errorf("%s: served (-want +got):\n%s", what, diff)
	}
}

func entryWithSelectors(name string, selectors ...string) string {
	return "apiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterStaticEntry\nmetadata:\n  name: " + name +
		"\nspec:\n  spiffeID: spiffe://example.org/" + name + "\n  parentID: spiffe://example.org/spire/server\n  selectors:\n  - " +
		strings.Join(selectors, "\n  - ") + "\n"
}

// TestSourceHoldsAHalfWrittenFile: a prefix of a file's new content, even one that decodes,
// is not applied while the file is being written; the whole new content is, once it has
// stayed for a poll interval.
func TestSourceHoldsAHalfWrittenFile(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after string
		// cut is where the writer stops for a while, in after.
		cut        string
		want, then map[string][]string
	}{{
		name:   "stream cut after its first document",
		before: entryWithSelectors("a", "unix:uid:1") + "---\n" + entryWithSelectors("b", "unix:uid:2") + "---\n" + entryWithSelectors("c", "unix:uid:3"),
		after:  entryWithSelectors("a", "unix:uid:1") + "---\n" + entryWithSelectors("b", "unix:uid:2") + "---\n" + entryWithSelectors("c", "unix:uid:3", "unix:gid:3"),
		cut:    "---\n",
		want:   map[string][]string{"a": {"unix:uid:1"}, "b": {"unix:uid:2"}, "c": {"unix:uid:3"}},
		then:   map[string][]string{"a": {"unix:uid:1"}, "b": {"unix:uid:2"}, "c": {"unix:uid:3", "unix:gid:3"}},
	}, {
		name:   "selectors cut short",
		before: entryWithSelectors("db", "unix:uid:999", "unix:gid:999"),
		after:  entryWithSelectors("db", "unix:uid:999", "unix:gid:999", "unix:path:/usr/bin/db"),
		cut:    "unix:uid:999\n",
		want:   map[string][]string{"db": {"unix:uid:999", "unix:gid:999"}},
		then:   map[string][]string{"db": {"unix:uid:999", "unix:gid:999", "unix:path:/usr/bin/db"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSettleEnv(t, map[string]string{"m.yaml": tc.before})
			e.expect("at start", tc.want)
			half := tc.after[:strings.Index(tc.after, tc.cut)+len(tc.cut)]
			if _, err := decodeFile([]byte(half), false); err != nil {
				t.Fatalf("the cut does not decode, so it would not test the settling: %v", err)
			}
			e.write("m.yaml", "")
			e.pollAfter(0)
			e.write("m.yaml", half)
			e.pollAfter(settleInterval)
			e.pollAfter(settleInterval / 2)
			e.expect("while half written", tc.want)
			e.write("m.yaml", tc.after)
			e.pollAfter(settleInterval / 2)
			e.expect("just written", tc.want)
			e.pollAfter(settleInterval)
			e.expect("settled", tc.then)
		})
	}
}

// TestSourceKeepsWhatAChangedFileDeclaredWhenItDoesNotDecode: a settled content that does not
// decode is reported, and deletes nothing.
func TestSourceKeepsWhatAChangedFileDeclaredWhenItDoesNotDecode(t *testing.T) {
	e := newSettleEnv(t, map[string]string{"m.yaml": entryWithSelectors("a", "unix:uid:1") + "---\n" + entryWithSelectors("b", "unix:uid:2")})
	e.write("m.yaml", entryWithSelectors("a", "unix:uid:1")+"---\nkind: [\n")
	e.pollAfter(0)
	e.pollAfter(settleInterval)
	e.expect("broken", map[string][]string{"a": {"unix:uid:1"}, "b": {"unix:uid:2"}})
	if len(e.source.problems) != 1 {
		t.Errorf("problems = %v, want the file's", e.source.problems)
	}
	e.pollAfter(time.Hour)
	e.expect("broken for an hour", map[string][]string{"a": {"unix:uid:1"}, "b": {"unix:uid:2"}})
}

// TestSourceHoldsAnEmptiedFile: a file that declares nothing any more is applied only once it
// has stayed so for emptySettleFactor poll intervals; a removed file deletes at once.
func TestSourceHoldsAnEmptiedFile(t *testing.T) {
	declared := map[string][]string{"a": {"unix:uid:1"}, "b": {"unix:uid:2"}}
	for _, empty := range []string{"", "# generated by a tool\n", "\n\n"} {
		e := newSettleEnv(t, map[string]string{"m.yaml": entryWithSelectors("a", "unix:uid:1"), "n.yaml": entryWithSelectors("b", "unix:uid:2")})
		e.write("m.yaml", empty)
		e.pollAfter(0)
		e.pollAfter(settleInterval)
		e.expect("emptied", declared)
		e.pollAfter(emptySettleFactor*settleInterval - settleInterval - 1)
		e.expect("emptied for nearly the hold", declared)
		e.pollAfter(1)
		e.expect("emptied for the hold", map[string][]string{"b": {"unix:uid:2"}})
	}

	e := newSettleEnv(t, map[string]string{"m.yaml": entryWithSelectors("a", "unix:uid:1"), "n.yaml": entryWithSelectors("b", "unix:uid:2")})
	if err := os.Remove(filepath.Join(e.dir, "m.yaml")); err != nil {
		t.Fatal(err)
	}
	e.pollAfter(0)
	e.expect("removed", map[string][]string{"b": {"unix:uid:2"}})
}

// TestNewSourceWaitsForFilesToSettle: start-up applies nothing from files that keep changing.
func TestNewSourceWaitsForFilesToSettle(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "m.yaml", entryWithSelectors("a", "unix:uid:1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The first read finds the file's content new: with no time to see it again, NewSource
	// must not return a source serving it.
	if _, err := NewSource(ctx, dir, Options{PollInterval: time.Hour}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("NewSource = %v, want the context's error", err)
	}
}
