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
	"fmt"
	"runtime/debug"
	"strings"
)

// Version describes the running binary in one line: the module version, which the go command
// stamps from the git tag when it builds a tagged, clean checkout (a release), and the VCS
// revision, so that a user can tell what an image runs (--version, and the start-up log).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "spire-registrar (no build information)"
	}
	return formatVersion(bi)
}

// formatVersion renders bi as "spire-registrar VERSION (revision REV, TIME, GO OS/ARCH)",
// leaving out what the build did not record: builds outside a git checkout, or with
// -buildvcs=false, have no revision, and `go run` or a build of an untagged commit reports
// "(devel)" or a pseudo-version.
func formatVersion(bi *debug.BuildInfo) string {
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var details []string
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " with uncommitted changes"
		}
		details = append(details, "revision "+rev)
	}
	if t := settings["vcs.time"]; t != "" {
		details = append(details, "committed "+t)
	}
	platform := bi.GoVersion
	if goos, goarch := settings["GOOS"], settings["GOARCH"]; goos != "" && goarch != "" {
		platform += " " + goos + "/" + goarch
	}
	if platform != "" {
		details = append(details, platform)
	}
	if len(details) == 0 {
		return "spire-registrar " + version
	}
	return fmt.Sprintf("spire-registrar %s (%s)", version, strings.Join(details, ", "))
}
