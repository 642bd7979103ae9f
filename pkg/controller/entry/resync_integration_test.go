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
	"slices"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// TestResyncRepairsOutOfBandChanges proves the full resync: entries changed, deleted or added
// behind the controller's back are put right within one gcInterval, while join-token agent
// entries, which no resource declares, are left alone.
func TestResyncRepairsOutOfBandChanges(t *testing.T) {
	e := newITEnv(t)
	ns := e.namespace("repair", nil)
	node := e.node("node")
	e.pod(ns, "a", node.Name, nil)
	e.pod(ns, "b", node.Name, nil)
	e.clusterSPIFFEID("repair", spirev1alpha1.ClusterSPIFFEIDSpec{
		SPIFFEIDTemplate:  "spiffe://{{ .TrustDomain }}/repair/{{ .PodMeta.Name }}",
		NamespaceSelector: sel(map[string]string{"kubernetes.io/metadata.name": ns}),
		DNSNameTemplates:  []string{"{{ .PodMeta.Name }}.example.com"},
	})
	// A join token makes SPIRE create an agent node entry of its own.
	if _, err := e.spire.CLI(e.ctx, "token generate", "-spiffeID", "spiffe://example.org/agent/by-token"); err != nil {
		t.Fatalf("token generate: %v", err)
	}

	const gcInterval = 2 * time.Second
	e.startController("gcInterval: 2s\n")
	a, b := "spiffe://example.org/repair/a", "spiffe://example.org/repair/b"
	agent := "spiffe://example.org/agent/by-token"
	e.waitForSPIFFEIDs(a, b, agent)

	byID := map[string]*spiretypes.Entry{}
	for _, en := range e.entries() {
		byID[spiffeIDs([]*spiretypes.Entry{en})[0]] = en
	}
	// Out of band: edit a's DNS names, delete b, add an orphan nobody declares.
	edited := byID[a]
	edited.DnsNames = []string{"hijacked.example.com"}
	if res, err := e.client.UpdateEntries(e.ctx, []*spiretypes.Entry{edited}, &spiretypes.EntryMask{DnsNames: true}); err != nil || res[0].Err != nil {
		t.Fatalf("editing out of band: %v %v", err, res)
	}
	if res, err := e.client.DeleteEntries(e.ctx, []string{byID[b].GetId()}); err != nil || res[0].Err != nil {
		t.Fatalf("deleting out of band: %v %v", err, res)
	}
	orphan := &spiretypes.Entry{SpiffeId: &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/orphan"},
		ParentId:  &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/somewhere"},
		Selectors: []*spiretypes.Selector{{Type: "unix", Value: "uid:1000"}}}
	if res, err := e.client.CreateEntries(e.ctx, []*spiretypes.Entry{orphan}); err != nil || res[0].Err != nil {
		t.Fatalf("adding an orphan: %v %v", err, res)
	}

	start := time.Now()
	e.eventually("out-of-band changes repaired", 3*gcInterval, func() (bool, error) {
		got := map[string]*spiretypes.Entry{}
		for _, en := range e.entries() {
			got[spiffeIDs([]*spiretypes.Entry{en})[0]] = en
		}
		_, orphanLeft := got["spiffe://example.org/orphan"]
		return !orphanLeft && got[b] != nil && got[agent] != nil && got[a] != nil &&
			got[a].GetId() == edited.GetId() && slices.Equal(got[a].GetDnsNames(), []string{"a.example.com"}), nil
	})
	t.Logf("out-of-band changes repaired %v after they were made (gcInterval %v)", time.Since(start), gcInterval)
}
