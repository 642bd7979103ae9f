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
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// This file exposes, for spire-registrar explain, the comparisons the reconciler decides with,
// so that explain never disagrees with it.

// Diff computes the plan a sync would make to turn current into declared, against a server
// that keeps every optional field. It is pure.
func Diff(declared []*render.DeclaredEntry, current []*spiretypes.Entry) Plan {
	return reconcile(declared, current, unsupportedFields{})
}

// Owns reports whether a reconciler with opts owns an entry: diffs, updates and deletes it.
// Entries it does not own (another entryIDPrefix, join-token agents) are invisible to it.
func Owns(opts Options, e *spiretypes.Entry) bool {
	return newOwnership(opts).owns(e)
}

// ManagedEntryFields are the JSON names in SPIRE's API of the entry fields the reconciler
// declares and compares, in the order it lists them.
func ManagedEntryFields() []string {
	var names []string
	for i := range entryFields {
		if entryFields[i].managed() {
			names = append(names, entryFields[i].name)
		}
	}
	return names
}
