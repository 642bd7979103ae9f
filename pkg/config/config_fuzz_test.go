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

package config

import (
	"os"
	"path/filepath"
	"testing"
	"text/template"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// FuzzConfigParse feeds arbitrary bytes to Parse. Whatever it accepts must be a config the
// controllers can run with: the checks below are the ones they rely on without checking again.
// The seed corpus is the config files shipped in manifests/ plus testdata/fuzz/FuzzConfigParse.
func FuzzConfigParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte("trustDomain: example.org\nclusterName: c\ngcInterval: 10s\n"))
	f.Add([]byte("trustDomain: example.org\nclusterName: c\ngcInterval: 10000000000\n"))
	f.Add([]byte("trustDomain: spiffe://example.org\nclusterName: c\n"))
	f.Add([]byte("trustDomain: Example.org\nclusterName: c\ngcInterval: -1s\n"))
	f.Add([]byte("trustDomain: example.org\nclusterName: c\nleaderElection:\n  leaderElect: true\n  leaseDuration: 2s\n  renewDeadline: 3s\n"))
	f.Add([]byte("trustDomain: example.org\nclusterName: c\nentryIDPrefix: a\nentryIDPrefixCleanup: \"\"\nignoreNamespaces: [\"kube-.*\", \"(\"]\n"))
	f.Add([]byte("{\"trustDomain\": \"example.org\", \"clusterName\": \"c\", \"gcInterval\": 1e300}"))
	f.Add([]byte("TrustDomain: x\ntrustDomain: example.org\nclusterName: c\nclusterName: d\nfoo: {bar: 1}\nleaderElection: {leaseDuraton: 1s}\n"))
	f.Add([]byte("trustDomain: example.org\nclusterName: c\ncacheNamespaces: {a: {labelSelector: {x: y}, labelSelectors: {x: \"y\"}}}\n"))
	for _, dir := range []string{"../../manifests/examples", "../../manifests/deployment"} {
		files, _ := filepath.Glob(filepath.Join(dir, "config*.yaml"))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			if cfg != nil {
				t.Errorf("Parse returned a config with error %v", err)
			}
			return
		}
		if cfg.TrustDomain.IsZero() {
			t.Fatalf("accepted a config without a trust domain")
		}
		if td, err := spiffeid.TrustDomainFromString(cfg.TrustDomain.Name()); err != nil || td != cfg.TrustDomain {
			t.Errorf("trust domain %q does not reparse: %v", cfg.TrustDomain.Name(), err)
		}
		if cfg.GCInterval <= 0 {
			t.Errorf("accepted gcInterval %v", cfg.GCInterval)
		}
		if cfg.ClusterName == "" {
			t.Errorf("accepted an empty clusterName")
		}
		if (cfg.SPIREServerSocketPath == "") == (cfg.SPIREServerAddress == "") {
			t.Errorf("accepted socket path %q and address %q: want exactly one", cfg.SPIREServerSocketPath, cfg.SPIREServerAddress)
		}
		if cfg.SPIREServerAddress != "" && (cfg.WorkloadAPIAddress == "" || cfg.SPIREServerID.IsZero()) {
			t.Errorf("accepted spireServerAddress without a Workload API (%q) or server ID (%q)", cfg.WorkloadAPIAddress, cfg.SPIREServerID)
		}
		if _, err := template.New("parentIDTemplate").Parse(cfg.ParentIDTemplate); err != nil {
			t.Errorf("accepted a parentIDTemplate that does not parse: %v", err)
		}
		if cfg.EntryIDPrefix != "" && !entryIDPrefixPattern.MatchString(cfg.EntryIDPrefix) {
			t.Errorf("accepted entryIDPrefix %q", cfg.EntryIDPrefix)
		}
		if c := cfg.EntryIDPrefixCleanup; c != nil && (*c == cfg.EntryIDPrefix || (*c != "" && !entryIDPrefixPattern.MatchString(*c))) {
			t.Errorf("accepted entryIDPrefixCleanup %q with entryIDPrefix %q", *c, cfg.EntryIDPrefix)
		}
		le := cfg.LeaderElection
		if le.LeaseDuration <= 0 || le.RenewDeadline <= 0 || le.RetryPeriod <= 0 || le.RenewDeadline >= le.LeaseDuration {
			t.Errorf("accepted leader election timings %+v", le)
		}
		if len(cfg.ignoreNamespaces) != len(cfg.IgnoreNamespaces) {
			t.Errorf("%d ignoreNamespaces patterns but %d compiled", len(cfg.IgnoreNamespaces), len(cfg.ignoreNamespaces))
		}
		for _, u := range cfg.Unknown {
			if u.Field == "" || u.Suggestion == u.Field {
				t.Errorf("unknown field %+v: want a path, and a suggestion other than the field", u)
			}
		}
		// Must not panic on any namespace name.
		_ = cfg.IsNamespaceIgnored(string(data))
		_ = cfg.Class().Matches(string(data))

		// Parsing is deterministic: the same bytes give the same config.
		again, err := Parse(data)
		if err != nil || again.TrustDomain != cfg.TrustDomain || again.GCInterval != cfg.GCInterval {
			t.Errorf("second Parse differs: %v", err)
		}
	})
}
