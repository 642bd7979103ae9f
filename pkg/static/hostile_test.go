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
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/testing/memtest"
)

// replaceWith makes the manifest name in dir whatever make creates at the path it is given,
// by a rename over it: the file is never missing, which would delete what it declared.
func replaceWith(t *testing.T, dir, name string, make func(path string) error) {
	t.Helper()
	tmp := filepath.Join(dir, ".new")
	if err := make(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// hostileFile is one kind of file static mode must not be stalled or bloated by. install
// puts it in place of the manifest name in dir; the function it returns undoes whatever could
// keep the poller stuck (run at the end of the case, so that a poller stuck on today's main
// can still be shut down).
type hostileFile struct {
	name    string
	install func(t *testing.T, dir, name string) (release func())
	// maxGrowth, when set, replaces the test's bound on peak memory growth: a file at the
	// cap is decoded and served, and what it declares takes memory.
	maxGrowth int64
	// timeout, if set, is how long an edit of another file may wait: a file at the cap is
	// decoded once when it changes, which under the race detector takes tens of seconds.
	timeout time.Duration
}

const hugeFileSize = 512 << 20

var hostileFiles = []hostileFile{
	{name: "FIFO with no writer", install: func(t *testing.T, dir, name string) func() {
		replaceWith(t, dir, name, func(path string) error { return syscall.Mkfifo(path, 0o600) })
		return func() {
			// A reader stuck in open(2) gets EOF once a writer has come and gone.
			if f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = f.Close()
			}
		}
	}},
	{name: "file growing past the cap", install: func(t *testing.T, dir, name string) func() {
		replaceWith(t, dir, name, func(path string) error {
			return os.WriteFile(path, []byte(entryNamed("kept", "spiffe://example.org/kept")), 0o600)
		})
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			defer func() { _ = f.Close() }()
			// Sparse growth by 8 MiB, each step ending in a written comment line, up to
			// 768 MiB; then a line at a time, for as long as the case runs.
			size := int64(len(entryNamed("kept", "spiffe://example.org/kept")))
			for step := 0; ; step++ {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if size < 768<<20 {
					size += 8 << 20
				}
				line := fmt.Sprintf("# %d\n", step)
				if _, err := f.WriteAt([]byte(line), size); err != nil {
					t.Error(err)
					return
				}
				size += int64(len(line))
			}
		})
		return func() {
			close(stop)
			wg.Wait()
		}
	}},
	{name: "file growing under the cap", install: func(t *testing.T, dir, name string) func() {
		kept := entryNamed("kept", "spiffe://example.org/kept")
		replaceWith(t, dir, name, func(path string) error { return os.WriteFile(path, []byte(kept), 0o600) })
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			defer func() { _ = f.Close() }()
			// A comment line a millisecond: the file never holds one content long enough to
			// settle, and every prefix decodes to what it declared.
			for step := 0; ; step++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				if _, err := fmt.Fprintf(f, "# %d\n", step); err != nil {
					t.Error(err)
					return
				}
			}
		})
		return func() {
			close(stop)
			wg.Wait()
		}
	}},
	{name: "512 MiB file", install: func(t *testing.T, dir, name string) func() {
		replaceWith(t, dir, name, func(path string) error {
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			return errors.Join(f.Truncate(hugeFileSize), f.Close())
		})
		return func() {}
	}},
	{name: "file at the cap, full of entries", install: func(t *testing.T, dir, name string) func() {
		// The most a file may make the source decode and serve.
		var b strings.Builder
		b.WriteString(entryNamed("kept", "spiffe://example.org/kept"))
		for i := 0; ; i++ {
			doc := "---\n" + entryNamed(fmt.Sprintf("e%d", i), fmt.Sprintf("spiffe://example.org/e%d", i))
			if b.Len()+len(doc) > DefaultMaxFileSize {
				break
			}
			b.WriteString(doc)
		}
		replaceWith(t, dir, name, func(path string) error { return os.WriteFile(path, []byte(b.String()), 0o600) })
		return func() {}
	}, maxGrowth: 128 << 20, timeout: time.Minute},
	{name: "symlink loop", install: func(t *testing.T, dir, name string) func() {
		if err := os.Symlink(name, filepath.Join(dir, ".loop")); err != nil {
			t.Fatal(err)
		}
		replaceWith(t, dir, name, func(path string) error { return os.Symlink(".loop", path) })
		return func() {}
	}},
	{name: "symlink to /dev/zero", install: func(t *testing.T, dir, name string) func() {
		replaceWith(t, dir, name, func(path string) error { return os.Symlink("/dev/zero", path) })
		return func() {}
	}},
	{name: "unix socket", install: func(t *testing.T, dir, name string) func() {
		var listener net.Listener
		replaceWith(t, dir, name, func(path string) error {
			var err error
			listener, err = net.Listen("unix", path)
			return err
		})
		// The socket file was renamed: closing must not try to remove it by its old name.
		listener.(*net.UnixListener).SetUnlinkOnClose(false)
		return func() { _ = listener.Close() }
	}},
}

// TestHostileFilesCannotStallThePoller replaces a manifest that declared an entry with each
// kind of hostile file in turn, then edits another manifest. For each, the edit must be
// served within the timeout, the replaced manifest's entry must be kept (never deleted: the
// file cannot be read, which says nothing about what it declares), and the process's peak
// memory must grow by less than maxGrowth while the hostile file sits in the directory.
func TestHostileFilesCannotStallThePoller(t *testing.T) {
	const (
		interval  = 100 * time.Millisecond
		edits     = 3
		timeout   = 10 * time.Second
		maxGrowth = 64 << 20
	)
	for _, hostile := range hostileFiles {
		t.Run(hostile.name, func(t *testing.T) {
			dir := t.TempDir()
			writeManifest(t, dir, "good.yaml", entryNamed("good", "spiffe://example.org/good-0"))
			writeManifest(t, dir, "kept.yaml", entryNamed("kept", "spiffe://example.org/kept"))
			source, err := NewSource(context.Background(), dir, Options{PollInterval: interval})
			if err != nil {
				t.Fatal(err)
			}
			entries := source.ClusterStaticEntries()
			var deleted sync.Map
			if _, err := entries.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
				if cse, ok := obj.(*spirev1alpha1.ClusterStaticEntry); ok {
					deleted.Store(cse.Name, true)
				}
			}}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			source.Start(ctx)
			lister := entries.Lister()
			if !cache.WaitForCacheSync(ctx.Done(), entries.Informer().HasSynced) {
				t.Fatal("informer did not sync")
			}
			release := func() {}
			defer func() {
				release()
				cancel()
				source.Shutdown()
			}()

			baseline := memtest.Baseline(t)
			release = hostile.install(t, dir, "kept.yaml")
			var slowest time.Duration
			for edit := 1; edit <= edits; edit++ {
				// Let the poller meet the hostile file before the edit.
				time.Sleep(2 * interval)
				want := fmt.Sprintf("spiffe://example.org/good-%d", edit)
				writeManifest(t, dir, "good.yaml", entryNamed("good", want))
				start := time.Now()
				timeout := cmp.Or(hostile.timeout, timeout)
				if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
					good, err := lister.Get("good")
					return err == nil && good.Spec.SPIFFEID == want, nil
				}); err != nil {
					t.Errorf("edit %d of good.yaml not served after %v", edit, timeout)
					slowest = timeout
					break
				}
				slowest = max(slowest, time.Since(start))
			}
			growth := memtest.Status(t, "VmHWM") - baseline
			t.Logf("%s: slowest edit served in %v (%v: never), peak memory +%d MiB", hostile.name, slowest.Round(time.Millisecond), cmp.Or(hostile.timeout, timeout), growth>>20)
			bound := cmp.Or(hostile.maxGrowth, maxGrowth)
			if raceEnabled {
				bound *= 3
			}
			if growth > bound {
				t.Errorf("peak memory grew by %d MiB, want at most %d MiB", growth>>20, bound>>20)
			}
			if _, err := lister.Get("kept"); err != nil {
				t.Errorf("the entry kept.yaml declared before it became unreadable is gone: %v", err)
			}
			if _, ok := deleted.Load("kept"); ok {
				t.Error("the entry kept.yaml declared was deleted on the way")
			}
		})
	}
}
