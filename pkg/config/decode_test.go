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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestUnknownFieldsAreReported: a file with fields the format does not declare starts, as it
// does with spire-controller-manager, and each such field is reported by its full path, with
// the declared field it probably meant when one is close.
func TestUnknownFieldsAreReported(t *testing.T) {
	// The chart's config as a newer chart might write it: a new top-level field, and new
	// fields in existing sections.
	newerChart := strings.NewReplacer(
		"  leaderElect: true\n", "  leaderElect: true\n  foo: 1\n",
		"  clusterStaticEntries: true\n", "  clusterStaticEntries: true\n  bar: true\n",
	).Replace(chartConfig) + "entryRenderCacheTTL: 10m\nwebhookServer: {tls: {minVersion: \"1.3\"}}\n"

	for _, tc := range []struct {
		name    string
		yaml    string
		unknown []UnknownField
		// check returns what the file's known fields became, compared with want.
		check func(*Config) any
		want  any
	}{
		{
			name: "newer chart",
			yaml: newerChart,
			unknown: []UnknownField{
				{Field: "entryRenderCacheTTL"}, {Field: "leaderElection.foo"}, {Field: "reconcile.bar"}, {Field: "webhookServer"},
			},
			check: func(c *Config) any { return []any{c.LeaderElection.Enabled, c.Reconcile, c.TrustDomain.Name()} },
			want:  []any{true, Reconcile{ClusterSPIFFEIDs: true, ClusterStaticEntries: true, ClusterFederatedTrustDomains: true}, "example.org"},
		},
		{
			name:    "misspelt top-level field",
			yaml:    minimal + "trustDomian: typo.org\n",
			unknown: []UnknownField{{Field: "trustDomian", Suggestion: "trustDomain"}},
			check:   func(c *Config) any { return c.TrustDomain.Name() }, want: "example.org",
		},
		{
			name:    "case-only difference does not set the field",
			yaml:    minimal + "TrustDomain: other.org\n",
			unknown: []UnknownField{{Field: "TrustDomain", Suggestion: "trustDomain"}},
			check:   func(c *Config) any { return c.TrustDomain.Name() }, want: "example.org",
		},
		{
			name:    "case-only difference in a section",
			yaml:    minimal + "leaderElection: {LeaderElect: true}\n",
			unknown: []UnknownField{{Field: "leaderElection.LeaderElect", Suggestion: "leaderElection.leaderElect"}},
			check:   func(c *Config) any { return c.LeaderElection.Enabled }, want: false,
		},
		{
			name: "misspelt nested fields",
			yaml: minimal + "webhook: {prot: 9443}\ncontroller: {recoverPanics: true}\npodCertificates: {enable: true}\n" +
				"leaderElection: {leaseDuraton: 30s}\nmetrics: {bindAdress: \":8082\"}\n",
			unknown: []UnknownField{
				{Field: "controller.recoverPanics", Suggestion: "controller.recoverPanic"},
				{Field: "leaderElection.leaseDuraton", Suggestion: "leaderElection.leaseDuration"},
				{Field: "metrics.bindAdress", Suggestion: "metrics.bindAddress"},
				{Field: "podCertificates.enable", Suggestion: "podCertificates.enabled"},
				{Field: "webhook.prot", Suggestion: "webhook.port"},
			},
			check: func(c *Config) any {
				return []any{c.PodCertificates.Enabled, c.LeaderElection.LeaseDuration, c.MetricsBindAddress}
			},
			want: []any{false, DefaultLeaseDuration, DisabledAddress},
		},
		{
			name:    "misspelt field under a map key",
			yaml:    minimal + "cacheNamespaces: {apps: {labelSelector: {a: b}}}\n",
			unknown: []UnknownField{{Field: "cacheNamespaces.apps.labelSelector", Suggestion: "cacheNamespaces.apps.labelSelectors"}},
			check:   func(c *Config) any { return c.CacheNamespaces }, want: map[string]NamespaceCache{"apps": {}},
		},
		{
			name:    "reconcile kind without its plural",
			yaml:    minimal + "reconcile: {clusterSPIFFEID: true, clusterStaticEntries: true}\n",
			unknown: []UnknownField{{Field: "reconcile.clusterSPIFFEID", Suggestion: "reconcile.clusterSPIFFEIDs"}},
			check:   func(c *Config) any { return c.Reconcile }, want: Reconcile{ClusterStaticEntries: true},
		},
		{
			name:    "a short new name is not taken for a typo",
			yaml:    minimal + "leaderElection: {ttl: 5s}\ngrpc: {foo: 1}\n",
			unknown: []UnknownField{{Field: "grpc.foo"}, {Field: "leaderElection.ttl"}},
			check:   func(c *Config) any { return c.LeaderElection.LeaseDuration }, want: DefaultLeaseDuration,
		},
		{
			name:  "fields under metadata are free",
			yaml:  minimal + "metadata: {name: x, anything: {goes: here}}\n",
			check: func(c *Config) any { return c.ClusterName }, want: "demo",
			unknown: nil,
		},
		{
			name:    "JSON",
			yaml:    `{"trustDomain": "example.org", "clusterName": "demo", "extra": [1, 2]}`,
			unknown: []UnknownField{{Field: "extra"}},
			check:   func(c *Config) any { return c.ClusterName }, want: "demo",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			sortByField := cmpopts.SortSlices(func(a, b UnknownField) bool { return a.Field < b.Field })
			if diff := cmp.Diff(tc.unknown, cfg.Unknown, sortByField, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("unknown fields (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, tc.check(cfg)); diff != "" {
				t.Errorf("known fields (-want +got):\n%s", diff)
			}
			if len(cfg.Duplicates) > 0 {
				t.Errorf("duplicates = %v, want none", cfg.Duplicates)
			}
		})
	}
}

// TestDuplicateFieldsKeepTheLast: a field set twice is not an error; as with
// spire-controller-manager, the last value is used, and the field is reported.
func TestDuplicateFieldsKeepTheLast(t *testing.T) {
	cfg, err := Parse([]byte(minimal + "clusterName: other\nleaderElection:\n  leaseDuration: 20s\n  leaseDuration: 30s\n" +
		"  leaseDuration: 40s\ncacheNamespaces:\n  apps: {labelSelectors: {a: b, a: c}}\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []string{"clusterName", "leaderElection.leaseDuration", "cacheNamespaces.apps.labelSelectors.a"}
	if diff := cmp.Diff(want, cfg.Duplicates, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("duplicates (-want +got):\n%s", diff)
	}
	if cfg.ClusterName != "other" || cfg.LeaderElection.LeaseDuration != 40*time.Second || cfg.CacheNamespaces["apps"].LabelSelector != "a=c" {
		t.Errorf("clusterName %q, leaseDuration %v, selector %q: want the last values (other, 40s, a=c)",
			cfg.ClusterName, cfg.LeaderElection.LeaseDuration, cfg.CacheNamespaces["apps"].LabelSelector)
	}
	if len(cfg.Unknown) > 0 {
		t.Errorf("unknown = %v, want none", cfg.Unknown)
	}

	// Keys a merge key brings in are overridden by the mapping's own, by YAML's rules: that
	// is not a duplicate.
	cfg, err = Parse([]byte(minimal + "metadata: {defaults: &d {leaseDuration: 20s}}\nleaderElection:\n  <<: *d\n  leaseDuration: 30s\n"))
	if err != nil {
		t.Fatalf("Parse with a merge key: %v", err)
	}
	if len(cfg.Duplicates) > 0 || cfg.LeaderElection.LeaseDuration != 30*time.Second {
		t.Errorf("merge key: duplicates %v, leaseDuration %v; want none and 30s", cfg.Duplicates, cfg.LeaderElection.LeaseDuration)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"trustDomian", "trustDomain", 1},
		{"prot", "port", 1},
		{"enable", "enabled", 1},
		{"kitten", "sitting", 3},
		{"", "abc", 3},
		{"abc", "", 3},
		{"ca", "abc", 3},
		{"same", "same", 0},
		{"naïve", "naive", 1},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}
