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

package spire

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Operations and kinds of a PlannedWrite.
const (
	OpCreate = "create"
	OpUpdate = "update"
	OpDelete = "delete"

	KindEntry                  = "entry"
	KindFederationRelationship = "federationRelationship"
)

// PlannedWrite is one line of a dry run's plan: a write spire-registrar would have made.
// Entries, relationships and masks are SPIRE's API types in protojson, as `spire-server`
// tooling and the API documentation show them.
type PlannedWrite struct {
	// Op is create, update or delete; Kind is entry or federationRelationship.
	Op   string `json:"op"`
	Kind string `json:"kind"`
	// Entry or Relationship is what a create or update sends; Mask, for an update, the
	// fields it sets.
	Entry        json.RawMessage `json:"entry,omitempty"`
	Relationship json.RawMessage `json:"relationship,omitempty"`
	Mask         json.RawMessage `json:"mask,omitempty"`
	// ID or TrustDomain names what a delete removes.
	ID          string `json:"id,omitempty"`
	TrustDomain string `json:"trustDomain,omitempty"`
}

// planWriter writes planned writes as JSON lines. Calls from concurrent workers never
// interleave: each call's lines go out in one Write.
type planWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func newPlanWriter(out io.Writer) *planWriter {
	return &planWriter{out: out}
}

func (p *planWriter) write(writes []PlannedWrite) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, w := range writes {
		if err := enc.Encode(w); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.out.Write(buf.Bytes())
	return err
}

// protoJSON is a message in protojson, or nil for a nil message.
func protoJSON(m proto.Message) json.RawMessage {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil
	}
	data, err := protojson.Marshal(m)
	if err != nil {
		// Marshalling SPIRE's own types does not fail; keep the line rather than lose it.
		return json.RawMessage(`null`)
	}
	// protojson's output is not stable across runs; compact it into the line.
	var compact bytes.Buffer
	if json.Compact(&compact, data) != nil {
		return data
	}
	return compact.Bytes()
}

func entryWrites(op string, entries []*types.Entry, mask *types.EntryMask) []PlannedWrite {
	writes := make([]PlannedWrite, len(entries))
	for i, e := range entries {
		writes[i] = PlannedWrite{Op: op, Kind: KindEntry, Entry: protoJSON(e), ID: e.GetId(), Mask: protoJSON(mask)}
	}
	return writes
}

func relationshipWrites(op string, rels []*types.FederationRelationship, mask *types.FederationRelationshipMask) []PlannedWrite {
	writes := make([]PlannedWrite, len(rels))
	for i, r := range rels {
		writes[i] = PlannedWrite{Op: op, Kind: KindFederationRelationship, Relationship: protoJSON(r),
			TrustDomain: r.GetTrustDomain(), Mask: protoJSON(mask)}
	}
	return writes
}
