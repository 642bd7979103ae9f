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

package entry_test

import (
	"strings"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// TestTwoControllersShareOneSPIREServer runs two controllers with different classes and entry
// ID prefixes against one real SPIRE server: each keeps to its own entries, resyncs included,
// and an operator's own entry survives both until a controller is told to clean it up.
func TestTwoControllersShareOneSPIREServer(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("shared", nil)
	node := e.node("node")
	e.pod(ns, "a", node.Name, map[string]string{"team": "a"})
	e.pod(ns, "b", node.Name, map[string]string{"team": "b"})
	classA, classB := e.prefix+"-a", e.prefix+"-b"
	for _, team := range []struct{ class, label string }{{classA, "a"}, {classB, "b"}} {
		e.clusterSPIFFEID("team-"+team.label, spirev1alpha1.ClusterSPIFFEIDSpec{
			ClassName:         team.class,
			SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/team/" + team.label + "/{{ .PodMeta.Name }}",
			NamespaceSelector: sel(map[string]string{"kubernetes.io/metadata.name": ns}),
			PodSelector:       sel(map[string]string{"team": team.label}),
		})
	}
	operator := &spiretypes.Entry{SpiffeId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/operator"},
		ParentId:  &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/spire/server"},
		Selectors: []*spiretypes.Selector{{Type: "unix", Value: "uid:0"}}}
	if res, err := e.client.CreateEntries(e.ctx, []*spiretypes.Entry{operator}); err != nil || res[0].Err != nil {
		t.Fatalf("creating the operator's entry: %v %v", err, res)
	}

	e.startControllerOfClass(classA, "entryIDPrefix: team-a\ngcInterval: 1s\n")
	b := e.startControllerOfClass(classB, "entryIDPrefix: team-b\ngcInterval: 1s\n")
	want := []string{"spiffe://example.org/team/a/a", "spiffe://example.org/team/b/b", "spiffe://example.org/operator"}
	e.waitForSPIFFEIDs(want...)
	// Let both run a few resyncs over each other's entries.
	time.Sleep(3 * time.Second)
	e.waitForSPIFFEIDs(want...)
	for _, en := range e.oracle() {
		switch en.SPIFFEID {
		case "spiffe://example.org/team/a/a":
			if !strings.HasPrefix(en.ID, "team-a.") {
				t.Errorf("team a's entry has ID %s", en.ID)
			}
		case "spiffe://example.org/team/b/b":
			if !strings.HasPrefix(en.ID, "team-b.") {
				t.Errorf("team b's entry has ID %s", en.ID)
			}
		}
	}

	// Team b moves its unprefixed leftovers out: the operator's entry goes, team a's stays.
	b.stop()
	e.startControllerOfClass(classB, "entryIDPrefix: team-b\nentryIDPrefixCleanup: \"\"\ngcInterval: 1s\n")
	e.waitForSPIFFEIDs("spiffe://example.org/team/a/a", "spiffe://example.org/team/b/b")
}
