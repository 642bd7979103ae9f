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

package entry

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"
)

// Declarer kinds, as named in Events and logs.
const (
	kindClusterSPIFFEID    = "ClusterSPIFFEID"
	kindClusterStaticEntry = "ClusterStaticEntry"
)

// podUIDSelectorPrefix starts the k8s selector value that ties a pod entry to its pod. Every
// pod entry carries it, so a pod's entries are found, and owned, by the pod's UID alone.
const podUIDSelectorPrefix = "pod-uid:"

// entryKey identifies an entry by what SPIRE itself treats as identity: SPIFFE ID, parent ID
// and the set of selectors. Two entries with one key are duplicates.
type entryKey string

// declarer is the resource that asks for an entry. When several ask for the same entry the
// oldest wins and the others are masked, so the winner is stable across restarts.
type declarer struct {
	kind    string
	name    string
	created time.Time
	// podUID is set for entries rendered for a pod: it scopes the entry to that pod.
	podUID types.UID
}

// compare orders declarers oldest first; kind and name break ties so the order is total.
func (d declarer) compare(other declarer) int {
	return cmp.Or(d.created.Compare(other.created), cmp.Compare(d.kind, other.kind), cmp.Compare(d.name, other.name))
}

// declaredEntry is one entry that a declarer wants SPIRE to hold.
type declaredEntry struct {
	entry    *spiretypes.Entry
	key      entryKey
	declarer declarer
}

func newDeclaredEntry(e *spiretypes.Entry, d declarer) *declaredEntry {
	return &declaredEntry{entry: e, key: keyOf(e), declarer: d}
}

// keyOf hashes an entry's identity. Selectors are sorted so their order does not matter.
func keyOf(e *spiretypes.Entry) entryKey {
	selectors := make([]string, 0, len(e.GetSelectors()))
	for _, s := range e.GetSelectors() {
		selectors = append(selectors, s.GetType()+":"+s.GetValue())
	}
	slices.Sort(selectors)
	h := sha256.New()
	// NUL cannot occur in a SPIFFE ID or selector, so it separates fields unambiguously.
	h.Write([]byte(spiffeIDString(e.GetSpiffeId())))
	h.Write([]byte{0})
	h.Write([]byte(spiffeIDString(e.GetParentId())))
	for _, s := range selectors {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	return entryKey(hex.EncodeToString(h.Sum(nil)))
}

// spiffeIDString renders SPIRE's split SPIFFE ID as a URI.
func spiffeIDString(id *spiretypes.SPIFFEID) string {
	if id == nil {
		return ""
	}
	return "spiffe://" + id.GetTrustDomain() + id.GetPath()
}

// podUIDOf returns the UID a pod entry is scoped to, or "" for an entry of no pod.
func podUIDOf(e *spiretypes.Entry) types.UID {
	for _, s := range e.GetSelectors() {
		if s.GetType() == "k8s" && strings.HasPrefix(s.GetValue(), podUIDSelectorPrefix) {
			return types.UID(strings.TrimPrefix(s.GetValue(), podUIDSelectorPrefix))
		}
	}
	return ""
}

// joinTokenAgentPath is where SPIRE puts agents attested by join token.
const joinTokenAgentPath = "/spire/agent/join_token/"

// isJoinTokenEntry reports whether SPIRE made the entry for an agent attested with a join
// token. Such entries are the operator's, declared by no resource, and must never be deleted.
func isJoinTokenEntry(e *spiretypes.Entry) bool {
	if !strings.HasPrefix(e.GetParentId().GetPath(), joinTokenAgentPath) {
		return false
	}
	for _, s := range e.GetSelectors() {
		if s.GetType() == "spiffe_id" {
			return true
		}
	}
	return false
}
