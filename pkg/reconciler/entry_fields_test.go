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
	"testing"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// TestEntryFieldsAreSPIREs checks that every row of entryFields is named by the JSON name in
// SPIRE's API of the mask bit it sets and can be cached, and that every field of SPIRE's Entry
// and EntryMask has a row: a field SPIRE adds fails this test until it gets one.
func TestEntryFieldsAreSPIREs(t *testing.T) {
	rows := map[string]bool{}
	for _, f := range entryFields {
		m := &spiretypes.EntryMask{}
		*f.mask(m) = true
		var set []string
		m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			set = append(set, fd.JSONName())
			return true
		})
		if len(set) != 1 || set[0] != f.name {
			t.Errorf("row %q sets mask fields %v, want exactly %q", f.name, set, f.name)
		}
		if rows[f.name] {
			t.Errorf("row %q appears twice", f.name)
		}
		rows[f.name] = true
		if f.keep == nil || f.restore == nil {
			t.Errorf("row %q has no keep or restore: the cache would lose the field", f.name)
		}
		if f.managed() && f.value == nil {
			t.Errorf("managed row %q has no value", f.name)
		}
		if !f.managed() && (f.key || f.grants != nil || f.isSet != nil || f.value != nil) {
			t.Errorf("row %q is not compared (no differs), yet has key, grants, isSet or value", f.name)
		}
	}
	for name, message := range map[string]protoreflect.Message{
		"Entry": (&spiretypes.Entry{}).ProtoReflect(), "EntryMask": (&spiretypes.EntryMask{}).ProtoReflect(),
	} {
		fields := message.Descriptor().Fields()
		for i := range fields.Len() {
			if field := fields.Get(i).JSONName(); field != "id" && !rows[field] {
				t.Errorf("SPIRE's %s field %q has no row in entryFields", name, field)
			}
		}
	}
	if len(entryFields) > 64 {
		t.Errorf("%d rows do not fit maskKey's and unsupportedFields' 64 bits", len(entryFields))
	}
}

// TestListedEntryFieldsAreTheTables: SPIRE is listed with exactly the fields the table does
// not mark unlisted, so a row added to the table is asked for by the listing that fills the
// cache.
func TestListedEntryFieldsAreTheTables(t *testing.T) {
	listed := spire.ListedEntryFields()
	for _, f := range entryFields {
		if got := *f.mask(listed); got == f.unlisted {
			t.Errorf("field %q: listed %t, but the table marks it unlisted %t", f.name, got, f.unlisted)
		}
	}
}

// TestUpdateChanges checks the fields an update names for explain, by SPIRE's JSON names and
// in the table's order, with both values printed, and none for fields that differ only in
// order.
func TestUpdateChanges(t *testing.T) {
	desired := &spiretypes.Entry{X509SvidTtl: 3600, DnsNames: []string{"a", "b"}, FederatesWith: []string{"x.org"}, Hint: "h"}
	current := &spiretypes.Entry{X509SvidTtl: 60, DnsNames: []string{"b", "a"}, FederatesWith: []string{"x.org"}, Admin: true}
	u := &EntryUpdate{Current: current, Desired: declare(desired, "c", 0, "p"), Mask: outdatedFields(current, desired, unsupportedFields{})}
	want := []FieldChange{
		{Field: "x509SvidTtl", Current: "60", Desired: "3600"},
		{Field: "admin", Current: "true", Desired: "false"},
		{Field: "hint", Current: `""`, Desired: `"h"`},
	}
	if diff := cmp.Diff(want, u.Changes()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	current = &spiretypes.Entry{X509SvidTtl: 3600, DnsNames: []string{"b", "a"}, FederatesWith: []string{"x.org"}, Hint: "h"}
	if mask := outdatedFields(current, desired, unsupportedFields{}); mask != nil {
		t.Errorf("mask of an up-to-date entry: %v, want none", mask)
	}
}
