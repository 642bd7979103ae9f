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
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testName finds the names of tests, fuzz targets and benchmarks in backquotes, with an
// optional subtest path or a trailing * for a family of tests.
var testName = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)(\\*|/[^`]*)?`")

// TestGuaranteesNameTestsThatExist reads docs/guarantees.md and requires every test it names
// as a proof to be declared in some _test.go file of the repository: a renamed or deleted
// test would otherwise leave a promise proven by nothing.
func TestGuaranteesNameTestsThatExist(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "guarantees.md"))
	if err != nil {
		t.Fatal(err)
	}
	var declared strings.Builder
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_output") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			declared.Write(src)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sources := declared.String()
	names := testName.FindAllStringSubmatch(string(page), -1)
	if len(names) < 50 {
		t.Fatalf("found only %d test names in docs/guarantees.md; the pattern no longer matches the page", len(names))
	}
	for _, m := range names {
		name, family := m[1], m[2] == "*"
		decl := "func " + name
		if !family {
			decl += "("
		}
		if !strings.Contains(sources, decl) {
			t.Errorf("docs/guarantees.md names %s, which no _test.go file declares", m[0])
		}
	}
	if !t.Failed() {
		t.Logf("%d test names in docs/guarantees.md, each declared", len(names))
	}
}
