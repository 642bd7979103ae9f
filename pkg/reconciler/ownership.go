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

package reconciler

import (
	"strings"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// ownership decides which of SPIRE's entries are the controller's. Several controllers (or
// other tools) can share one SPIRE server when each names its entries with its own ID prefix;
// an entry outside a controller's prefix is invisible to it: never diffed, never deleted.
type ownership struct {
	// prefix, when set, makes new entry IDs "<prefix>.<unique>" and limits ownership to them.
	prefix string
	// cleanup, when set, marks entries to delete and never reuse: those whose ID starts with
	// "<cleanup>." or, for "", IDs without a dot (SPIRE's own UUIDs). It moves a SPIRE server
	// from one prefix (or none) to another.
	cleanup *string
	// skipClusterSPIFFEIDs and skipClusterStaticEntries disown the entries of a kind that is
	// not reconciled: pod entries (ClusterSPIFFEIDs) and entries of no pod (ClusterStaticEntries).
	skipClusterSPIFFEIDs, skipClusterStaticEntries bool
	// keep are SPIFFE IDs whose entries are never deleted (Options.KeepSPIFFEIDs).
	keep map[string]bool
}

func newOwnership(opts Options) ownership {
	o := ownership{prefix: opts.EntryIDPrefix, cleanup: opts.EntryIDPrefixCleanup,
		skipClusterSPIFFEIDs: opts.SkipClusterSPIFFEIDs, skipClusterStaticEntries: opts.SkipClusterStaticEntries}
	for _, id := range opts.KeepSPIFFEIDs {
		if o.keep == nil {
			o.keep = map[string]bool{}
		}
		o.keep[id] = true
	}
	return o
}

// keeps reports whether an entry must never be deleted, whatever the plan says.
func (o ownership) keeps(e *spiretypes.Entry) bool {
	return len(o.keep) > 0 && o.keep[spiffeIDString(e.GetSpiffeId())]
}

// spiffeIDString formats an entry's SPIFFE ID as spiffe://<trust domain><path>.
func spiffeIDString(id *spiretypes.SPIFFEID) string {
	return "spiffe://" + id.GetTrustDomain() + id.GetPath()
}

// owns reports whether an entry is the controller's to diff, update and delete. Join-token
// agent entries are made by the operator, not declared by any resource, and are never owned.
func (o ownership) owns(e *spiretypes.Entry) bool {
	if isJoinTokenEntry(e) {
		return false
	}
	if isPod := render.PodUIDOf(e) != ""; (isPod && o.skipClusterSPIFFEIDs) || (!isPod && o.skipClusterStaticEntries) {
		return false
	}
	return o.prefix == "" || strings.HasPrefix(e.GetId(), o.prefix+".")
}

// deleteOnly reports whether an entry is left over from a previous ownership and is to be
// deleted at the next full resync.
func (o ownership) deleteOnly(e *spiretypes.Entry) bool {
	if o.cleanup == nil || isJoinTokenEntry(e) || o.owns(e) {
		return false
	}
	if *o.cleanup == "" {
		return !strings.Contains(e.GetId(), ".")
	}
	return strings.HasPrefix(e.GetId(), *o.cleanup+".")
}

// newID returns the ID to create an entry with: "" lets SPIRE choose when there is no prefix.
func (o ownership) newID() string {
	if o.prefix == "" {
		return ""
	}
	return o.prefix + "." + string(uuid.NewUUID())
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
