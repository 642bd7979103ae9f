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
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/spire-registrar/spire-registrar/pkg/app"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/static"
	"github.com/spire-registrar/spire-registrar/pkg/testing/memtest"
	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestStaticModeHostileFilesStallNothing runs static mode against the real spire-server, then
// replaces a manifest that declared an entry with a FIFO no one writes to and adds a sparse
// 512 MiB manifest. An edit of another manifest must still reach SPIRE within the timeout,
// the replaced manifest's entry must stay in SPIRE with its ID (an unreadable file keeps what
// it declared), and the process's peak memory must not grow by more than maxGrowth.
func TestStaticModeHostileFilesStallNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real spire-server")
	}
	const (
		timeout   = 30 * time.Second
		maxGrowth = 64 << 20
	)
	spire := realcluster.NewSPIRE(t, realcluster.SPIREOptions{})
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("good.yaml", staticEntry("good", "spiffe://example.org/good-0", []string{"unix:uid:1"}))
	write("kept.yaml", staticEntry("kept", "spiffe://example.org/kept", []string{"unix:uid:2"}))

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
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- app.RunStatic(runCtx, app.ControllerContext{Config: cfg, SPIRE: spireClient, StaticSource: source}, 1, nil)
	}()
	fifo := filepath.Join(dir, "kept.yaml")
	defer func() {
		// A poller stuck opening the FIFO gets EOF once a writer has come and gone.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = f.Close()
		}
		stopRun()
		if err := <-done; err != nil {
			t.Errorf("RunStatic: %v", err)
		}
	}()

	idsBySPIFFEID := func() map[string]string {
		all, err := spire.EntryShow(ctx)
		if err != nil {
			return nil
		}
		ids := map[string]string{}
		for _, e := range all {
			ids[e.SPIFFEID] = e.ID
		}
		return ids
	}
	waitFor := func(what string, cond func(map[string]string) bool) time.Duration {
		t.Helper()
		start := time.Now()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			return cond(idsBySPIFFEID()), nil
		}); err != nil {
			t.Errorf("%s: not after %v; SPIRE holds %v", what, timeout, idsBySPIFFEID())
			return timeout
		}
		return time.Since(start)
	}
	waitFor("both manifests in SPIRE", func(ids map[string]string) bool { return len(ids) == 2 })
	keptID := idsBySPIFFEID()["spiffe://example.org/kept"]

	baseline := memtest.Baseline(t)
	tmp := filepath.Join(dir, ".fifo")
	if err := syscall.Mkfifo(tmp, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, fifo); err != nil {
		t.Fatal(err)
	}
	huge, err := os.Create(filepath.Join(dir, ".huge"))
	if err == nil {
		err = errors.Join(huge.Truncate(512<<20), huge.Close())
	}
	if err == nil {
		err = os.Rename(filepath.Join(dir, ".huge"), filepath.Join(dir, "huge.yaml"))
	}
	if err != nil {
		t.Fatal(err)
	}
	// Let the poller meet both before the edit.
	time.Sleep(300 * time.Millisecond)

	write("good.yaml", staticEntry("good", "spiffe://example.org/good-1", []string{"unix:uid:1"}))
	took := waitFor("the edit of good.yaml in SPIRE", func(ids map[string]string) bool {
		_, ok := ids["spiffe://example.org/good-1"]
		return ok
	})
	growth := memtest.Status(t, "VmHWM") - baseline
	t.Logf("with a FIFO and a 512 MiB manifest in the directory: an edit reached SPIRE in %v (%v: never), peak memory +%d MiB",
		took.Round(time.Millisecond), timeout, growth>>20)
	if growth > maxGrowth {
		t.Errorf("peak memory grew by %d MiB, want at most %d MiB", growth>>20, maxGrowth>>20)
	}
	if id := idsBySPIFFEID()["spiffe://example.org/kept"]; id != keptID {
		t.Errorf("kept.yaml's entry is %q in SPIRE, want %q as before the file became a FIFO", id, keptID)
	}
}
