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

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	spirelisters "github.com/spire-registrar/spire-registrar/generated/listers/spire/v1alpha1"
)

func writeManifest(t *testing.T, dir, name, content string) {
	t.Helper()
	// Write then rename, as editors and ConfigMap updates do, so a poll never reads half a file.
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func entryNamed(name, spiffeID string) string {
	return strings.NewReplacer("name: db", "name: "+name, "spiffe://example.org/db", spiffeID).Replace(staticEntryYAML)
}

// startSource starts a source over dir with a fast poll and returns the lister of its
// ClusterStaticEntry informer, once synced.
func startSource(t *testing.T, dir string) spirelisters.ClusterStaticEntryLister {
	t.Helper()
	source, err := NewSource(context.Background(), dir, Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	informer := source.ClusterStaticEntries()
	ctx, cancel := context.WithCancel(context.Background())
	source.Start(ctx)
	t.Cleanup(func() {
		cancel()
		source.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}
	return informer.Lister()
}

// waitForEntries waits until the lister holds exactly the wanted name → SPIFFE ID pairs.
func waitForEntries(t *testing.T, lister spirelisters.ClusterStaticEntryLister, want map[string]string) {
	t.Helper()
	var got map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		all, err := lister.List(labels.Everything())
		if err != nil {
			return false, err
		}
		got = map[string]string{}
		for _, cse := range all {
			got[cse.Name] = cse.Spec.SPIFFEID
		}
		return len(got) == len(want) && func() bool {
			for k, v := range want {
				if got[k] != v {
					return false
				}
			}
			return true
		}(), nil
	})
	if err != nil {
		t.Fatalf("informer holds %v, want %v", got, want)
	}
}

func TestSourceFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "a.yaml", entryNamed("a", "spiffe://example.org/a")+"---\n"+entryNamed("b", "spiffe://example.org/b"))
	writeManifest(t, dir, "notes.txt", "not a manifest")
	lister := startSource(t, dir)
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a", "b": "spiffe://example.org/b"})
	a, _ := lister.Get("a")
	if a.UID == "" || a.Generation != 1 || a.CreationTimestamp.IsZero() || a.ResourceVersion == "" {
		t.Errorf("served without the metadata controllers rely on: %+v", a.ObjectMeta)
	}

	// An edit is an update of the same object with a new generation.
	writeManifest(t, dir, "a.yaml", entryNamed("a", "spiffe://example.org/a2")+"---\n"+entryNamed("b", "spiffe://example.org/b"))
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a2", "b": "spiffe://example.org/b"})
	edited, _ := lister.Get("a")
	if edited.UID != a.UID || edited.Generation != 2 || !edited.CreationTimestamp.Equal(&a.CreationTimestamp) {
		t.Errorf("edit changed identity or generation: before %+v after %+v", a.ObjectMeta, edited.ObjectMeta)
	}

	// A new file adds; a resource dropped from a file is deleted.
	writeManifest(t, dir, "c.yml", entryNamed("c", "spiffe://example.org/c"))
	writeManifest(t, dir, "a.yaml", entryNamed("a", "spiffe://example.org/a2"))
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a2", "c": "spiffe://example.org/c"})

	// Removing a file deletes what it declared.
	if err := os.Remove(filepath.Join(dir, "c.yml")); err != nil {
		t.Fatal(err)
	}
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a2"})
}

// TestSourceKeepsWhatABrokenFileDeclared: a typo in a file must not delete its entries.
func TestSourceKeepsWhatABrokenFileDeclared(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "a.yaml", entryNamed("a", "spiffe://example.org/a"))
	writeManifest(t, dir, "b.yaml", entryNamed("b", "spiffe://example.org/b"))
	lister := startSource(t, dir)
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a", "b": "spiffe://example.org/b"})

	writeManifest(t, dir, "a.yaml", "apiVersion: [\n")
	writeManifest(t, dir, "b.yaml", entryNamed("b", "spiffe://example.org/b2"))
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a", "b": "spiffe://example.org/b2"})

	// A name declared by a second file is ignored; the first file's declaration stays.
	writeManifest(t, dir, "c.yaml", entryNamed("b", "spiffe://example.org/impostor"))
	time.Sleep(100 * time.Millisecond)
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a", "b": "spiffe://example.org/b2"})

	// Once fixed, the file's new content applies.
	writeManifest(t, dir, "a.yaml", entryNamed("a", "spiffe://example.org/a3"))
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a3", "b": "spiffe://example.org/b2"})
}

// TestSourceFollowsAConfigMapMount checks the layout kubelet gives a mounted ConfigMap: files
// are symlinks into a ..data directory that an update swaps atomically.
func TestSourceFollowsAConfigMapMount(t *testing.T) {
	dir := t.TempDir()
	mount := func(version, content string) {
		data := filepath.Join(dir, version)
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "entries.yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(version, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(link, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	mount("..v1", entryNamed("a", "spiffe://example.org/a"))
	if err := os.Symlink(filepath.Join("..data", "entries.yaml"), filepath.Join(dir, "entries.yaml")); err != nil {
		t.Fatal(err)
	}
	lister := startSource(t, dir)
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a"})
	mount("..v2", entryNamed("a", "spiffe://example.org/a-v2"))
	waitForEntries(t, lister, map[string]string{"a": "spiffe://example.org/a-v2"})
}

func TestNewSourceRefusesProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"broken file", map[string]string{"a.yaml": "kind: [\n"}, []string{"a.yaml", "document 1"}},
		{"ClusterSPIFFEID", map[string]string{"ids.yaml": "apiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterSPIFFEID\nmetadata: {name: x}\n"},
			[]string{"ids.yaml", "ClusterSPIFFEID is not supported in static mode"}},
		{"declared twice", map[string]string{"a.yaml": entryNamed("x", "spiffe://example.org/1"), "b.yaml": entryNamed("x", "spiffe://example.org/2")},
			[]string{"b.yaml", `ClusterStaticEntry "x" is already declared in`, "a.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				writeManifest(t, dir, name, content)
			}
			_, err := NewSource(context.Background(), dir, Options{PollInterval: time.Second})
			if err == nil {
				t.Fatal("NewSource accepted the directory")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := NewSource(context.Background(), filepath.Join(t.TempDir(), "missing"), Options{PollInterval: time.Second}); err == nil || !strings.Contains(err.Error(), "staticManifestPath") {
		t.Errorf("missing directory: err = %v, want one naming staticManifestPath", err)
	}
}
