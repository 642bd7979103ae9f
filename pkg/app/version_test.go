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

package app

import (
	"flag"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	setting := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{{
		name: "release: a tagged, clean checkout",
		bi: debug.BuildInfo{
			GoVersion: "go1.26.0",
			Main:      debug.Module{Path: "github.com/spire-registrar/spire-registrar", Version: "v0.1.0"},
			Settings: setting("GOOS", "linux", "GOARCH", "arm64", "vcs", "git", "vcs.revision", rev,
				"vcs.time", "2026-08-01T12:00:00Z", "vcs.modified", "false"),
		},
		want: "spire-registrar v0.1.0 (revision " + rev + ", committed 2026-08-01T12:00:00Z, go1.26.0 linux/arm64)",
	}, {
		name: "uncommitted changes",
		bi: debug.BuildInfo{
			GoVersion: "go1.26.0",
			Main:      debug.Module{Version: "v0.1.0+dirty"},
			Settings:  setting("GOOS", "linux", "GOARCH", "amd64", "vcs.revision", rev, "vcs.modified", "true"),
		},
		want: "spire-registrar v0.1.0+dirty (revision " + rev + " with uncommitted changes, go1.26.0 linux/amd64)",
	}, {
		name: "no VCS information (-buildvcs=false)",
		bi: debug.BuildInfo{
			GoVersion: "go1.26.0",
			Main:      debug.Module{Version: "(devel)"},
			Settings:  setting("GOOS", "linux", "GOARCH", "amd64"),
		},
		want: "spire-registrar (devel) (go1.26.0 linux/amd64)",
	}, {
		name: "nothing recorded",
		want: "spire-registrar (devel)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatVersion(&tc.bi); got != tc.want {
				t.Errorf("formatVersion() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestVersionFlag checks that --version is registered and that this test binary, whose build
// information the go command always records, is described.
func TestVersionFlag(t *testing.T) {
	var opts Options
	fs := flag.NewFlagSet("spire-registrar", flag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse([]string{"--version"}); err != nil {
		t.Fatal(err)
	}
	if !opts.ShowVersion {
		t.Error("--version did not set ShowVersion")
	}
	if got := Version(); !strings.HasPrefix(got, "spire-registrar ") || strings.Contains(got, "no build information") {
		t.Errorf("Version() = %q", got)
	}
}
