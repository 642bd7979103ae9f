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

package explain

import (
	"bytes"
	"encoding/json"
	"testing"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
)

// TestEntryShowsEveryManagedField: every entry field the reconciler declares and compares
// reaches explain's JSON and text, so that an entry field added to the reconciler's table
// fails here until explain shows it. Each field is changed alone, and both outputs must change.
func TestEntryShowsEveryManagedField(t *testing.T) {
	base := &spiretypes.Entry{
		Id:        "id-1",
		SpiffeId:  &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/a"},
		ParentId:  &spiretypes.SPIFFEID{TrustDomain: "example.org", Path: "/node"},
		Selectors: []*spiretypes.Selector{{Type: "k8s", Value: "pod-uid:1"}},
	}
	outputs := func(e *spiretypes.Entry) (string, string) {
		t.Helper()
		shown := entryOf(e)
		js, err := json.Marshal(shown)
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		writeEntryList(&text, "entries", []Entry{shown})
		return string(js), text.String()
	}
	baseJSON, baseText := outputs(base)
	for _, name := range reconciler.ManagedEntryFields() {
		changed := proto.CloneOf(base)
		if !changeField(changed.ProtoReflect(), name) {
			t.Errorf("field %q: the test cannot change a field of its kind", name)
			continue
		}
		js, text := outputs(changed)
		if js == baseJSON {
			t.Errorf("field %q: explain's JSON does not show it", name)
		}
		if text == baseText {
			t.Errorf("field %q: explain's text does not show it", name)
		}
	}
}

// changeField gives the field of m whose JSON name is name a value other than the one it has.
func changeField(m protoreflect.Message, name string) bool {
	fd := m.Descriptor().Fields().ByJSONName(name)
	if fd == nil {
		return false
	}
	switch {
	case fd.IsList() && fd.Kind() == protoreflect.StringKind:
		m.Mutable(fd).List().Append(protoreflect.ValueOfString("changed.example"))
	case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
		list := m.Mutable(fd).List()
		elem := list.NewElement()
		setStrings(elem.Message())
		list.Append(elem)
	case fd.Kind() == protoreflect.MessageKind:
		v := m.NewField(fd)
		setStrings(v.Message())
		m.Set(fd, v)
	case fd.Kind() == protoreflect.StringKind:
		m.Set(fd, protoreflect.ValueOfString("changed"))
	case fd.Kind() == protoreflect.BoolKind:
		m.Set(fd, protoreflect.ValueOfBool(!m.Get(fd).Bool()))
	case fd.Kind() == protoreflect.Int32Kind:
		m.Set(fd, protoreflect.ValueOfInt32(int32(m.Get(fd).Int())+7))
	case fd.Kind() == protoreflect.Int64Kind:
		m.Set(fd, protoreflect.ValueOfInt64(m.Get(fd).Int()+7))
	default:
		return false
	}
	return true
}

// setStrings sets every string field of m to a value of its own.
func setStrings(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Kind() == protoreflect.StringKind && !fd.IsList() {
			m.Set(fd, protoreflect.ValueOfString("changed-"+string(fd.Name())))
		}
	}
}
