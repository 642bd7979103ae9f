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

package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// compatibilityRef finds, in order, the test names of docs/compatibility.md and the package
// directories that follow them as "(`dir`)".
var compatibilityRef = regexp.MustCompile("`((?:Test|Fuzz)[A-Za-z0-9_]*)`|\\(`([a-z][a-z0-9_./-]*)`\\)")

// TestCompatibilityNamesTestsWhereTheyAre reads docs/compatibility.md, where each test that
// proves a tested version is followed by its package directory, and requires every one to be
// declared in a _test.go file of that directory: a version is claimed as tested only as long as
// its test is there.
func TestCompatibilityNamesTestsWhereTheyAre(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i, line := range strings.Split(string(page), "\n") {
		// Names wait for the directory that follows them on the same line.
		var pending []string
		for _, m := range compatibilityRef.FindAllStringSubmatch(line, -1) {
			if m[1] != "" {
				pending = append(pending, m[1])
				continue
			}
			dir := m[2]
			files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*_test.go"))
			if err != nil {
				t.Fatal(err)
			}
			var sources strings.Builder
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				sources.Write(src)
			}
			for _, name := range pending {
				if !strings.Contains(sources.String(), "func "+name+"(") {
					t.Errorf("docs/compatibility.md:%d: %s is declared in no _test.go file of %s", i+1, name, dir)
				}
				checked++
			}
			pending = nil
		}
		if len(pending) > 0 {
			t.Errorf("docs/compatibility.md:%d: %s named without its package directory, as (`dir`)", i+1, strings.Join(pending, ", "))
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d test names in docs/compatibility.md; the pattern no longer matches the page", checked)
	}
	if !t.Failed() {
		t.Logf("%d test names in docs/compatibility.md, each declared where the page says", checked)
	}
}
