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
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestReadManifestStopsAtTheCap: a regular file whose stat says less than it holds (files of
// /proc say 0 bytes) is read no further than the cap.
func TestReadManifestStopsAtTheCap(t *testing.T) {
	info, err := os.Stat("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Mode().IsRegular() || info.Size() != 0 {
		t.Fatalf("/proc/self/status is %v of %d bytes; the test needs a regular file that says it is empty", info.Mode(), info.Size())
	}
	_, _, _, err = readManifest("/proc/self/status", 64)
	if err == nil || !strings.Contains(err.Error(), "larger than staticManifestLimits.maxFileSize (64)") {
		t.Errorf("readManifest = %v, want the file refused as larger than the cap", err)
	}
	data, _, _, err := readManifest("/proc/self/status", 1<<20)
	if err != nil || !strings.Contains(string(data), "VmHWM") {
		t.Errorf("readManifest under the cap = %q, %v", data, err)
	}
}

// TestNewSourceRefusesUnreadableFiles: at start-up nothing was declared before, so a manifest
// that cannot be read stops start-up naming it, at once, rather than starting without what it
// may declare (which would delete it from SPIRE).
func TestNewSourceRefusesUnreadableFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"FIFO", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "a named pipe (FIFO), not a regular file"},
		{"over the file cap", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(entryNamed("big", "spiffe://example.org/big")), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "larger than staticManifestLimits.maxFileSize (100)"},
		{"symlink loop", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Base(path), path); err != nil {
				t.Fatal(err)
			}
		}, "stat: too many levels of symbolic links"},
		{"device", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}, "a character device, not a regular file"},
		{"socket", func(t *testing.T, path string) {
			listener, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = listener.Close() })
		}, "a socket, not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeManifest(t, dir, "good.yaml", "# nothing yet\n")
			tc.make(t, filepath.Join(dir, "x.yaml"))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := NewSource(ctx, dir, Options{PollInterval: 10 * time.Millisecond, MaxFileSize: 100})
			if err == nil || !strings.Contains(err.Error(), "x.yaml: "+tc.want) {
				t.Errorf("NewSource = %v, want an error naming x.yaml: %s", err, tc.want)
			}
		})
	}
}

// TestSourceCapsTheTotal: a content that would take the files applied over the total cap is
// reported and not applied, the file keeping what it declared; it applies once room is made.
func TestSourceCapsTheTotal(t *testing.T) {
	a, b := entryWithSelectors("a", "unix:uid:1"), entryWithSelectors("b", "unix:uid:2")
	total := int64(len(a) + len(b) + 10)
	e := newSettleEnvWith(t, map[string]string{"a.yaml": a, "b.yaml": b}, Options{MaxTotalSize: total})
	e.expect("at start", map[string][]string{"a": {"unix:uid:1"}, "b": {"unix:uid:2"}})

	bigger := entryWithSelectors("b", "unix:uid:2", "unix:gid:2")
	e.write("b.yaml", bigger)
	e.pollAfter(0)
	e.pollAfter(settleInterval)
	e.expect("over the total", map[string][]string{"a": {"unix:uid:1"}, "b": {"unix:uid:2"}})
	if len(e.source.problems) != 1 || !strings.Contains(strings.Join(slices.Collect(maps.Keys(e.source.problems)), ""), "b.yaml: its") {
		t.Errorf("problems = %v, want b.yaml's over the total", e.source.problems)
	}

	if err := os.Remove(filepath.Join(e.dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	e.pollAfter(settleInterval)
	e.expect("room made", map[string][]string{"b": {"unix:uid:2", "unix:gid:2"}})
	if len(e.source.problems) != 0 {
		t.Errorf("problems = %v, want none", e.source.problems)
	}

	if _, err := NewSource(context.Background(), e.dir, Options{PollInterval: settleInterval, MaxTotalSize: 100}); err == nil ||
		!strings.Contains(err.Error(), "staticManifestLimits.maxTotalSize (100)") {
		t.Errorf("NewSource over the total = %v, want the total named", err)
	}
}

// TestUnchangedFilesAreNotReadAgain: once stat can vouch for a file (its last change well
// before the last read), polls stop reading it; a rewrite in place of the same size is still
// seen.
func TestUnchangedFilesAreNotReadAgain(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "a.yaml", entryNamed("a", "spiffe://example.org/a1"))
	source, err := NewSource(context.Background(), dir, Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lastRead map[string][]byte
	source.SetPollHook(func(contents map[string][]byte) {
		mu.Lock()
		defer mu.Unlock()
		lastRead = contents
	})
	lister := source.ClusterStaticEntries().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	source.Start(ctx)
	defer func() {
		cancel()
		source.Shutdown()
	}()
	readsA := func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := lastRead["a.yaml"]
		return lastRead != nil && ok
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, racyWindow+5*time.Second, false, func(context.Context) (bool, error) {
		return !readsA(), nil
	}); err != nil {
		t.Fatalf("a.yaml, unchanged, is still read at every poll %v after it was written", racyWindow+5*time.Second)
	}

	// Same size, new content, written in place.
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(entryNamed("a", "spiffe://example.org/a2")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		a, err := lister.Get("a")
		return err == nil && a.Spec.SPIFFEID == "spiffe://example.org/a2", nil
	}); err != nil {
		t.Fatal("the rewrite in place was not applied")
	}
}
