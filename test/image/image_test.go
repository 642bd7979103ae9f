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

package image_test

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

// TestImageBinaryIsStatic checks that the binary hack/build-image.sh puts into the image needs
// no dynamic loader and no shared library: the image is FROM scratch, with no libc.
func TestImageBinaryIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image; skipped with -short")
	}
	_, _, bin := imageForTest(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			t.Errorf("the binary has a PT_INTERP header: it needs a dynamic loader")
		case elf.PT_DYNAMIC:
			t.Errorf("the binary has a PT_DYNAMIC header: it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Errorf("reading DT_NEEDED: %v", err)
	} else if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	if f.Section(".dynamic") != nil || f.Section(".interp") != nil {
		t.Errorf("the binary has a .dynamic or .interp section")
	}
	out, _ := exec.CommandContext(t.Context(), bin, "-h").CombinedOutput()
	if !strings.Contains(string(out), "-config") {
		t.Errorf("%s -h printed:\n%s", bin, out)
	}
}

// repoPath returns a path in the repository checkout.
func repoPath(elem ...string) string {
	root, err := realcluster.RepoRoot()
	if err != nil {
		panic(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}
