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
)

// cachedEntry is an entry as the cache keeps it: the fields of spiretypes.Entry without the
// protobuf bookkeeping, its SPIFFE ID inline, its trust domain, parent ID and selectors shared
// through the interner and the fields pod entries rarely set behind one pointer. The cache
// holds one per entry SPIRE has, hundreds of thousands at the field's size: 112 bytes plus
// the ID and path strings, where a decoded Entry and its SPIFFEID take about 300.
type cachedEntry struct {
	id string
	// trustDomain and path are the SPIFFE ID's; trustDomain is nil when the entry has none,
	// which keeps a missing SPIFFE ID apart from an empty one.
	trustDomain *string
	path        string
	parent      *spiretypes.SPIFFEID
	selectors   []*spiretypes.Selector
	revision    int64
	createdAt   int64
	x509SVIDTTL int32
	jwtSVIDTTL  int32
	admin       bool
	downstream  bool
	storeSVID   bool
	rare        *rareEntryFields
}

// rareEntryFields are the fields most entries leave empty.
type rareEntryFields struct {
	federatesWith        []string
	dnsNames             []string
	hint                 string
	expiresAt            int64
	additionalAttributes *spiretypes.Entry_AdditionalAttributes
}

// noRareFields stands for the rare fields of an entry that sets none of them.
var noRareFields rareEntryFields

// rareFields returns the entry's rare fields, allocating them on the first one set.
func (c *cachedEntry) rareFields() *rareEntryFields {
	if c.rare == nil {
		c.rare = &rareEntryFields{}
	}
	return c.rare
}

// rareOrNone returns the entry's rare fields, all empty when it sets none; they must not be
// modified.
func (c *cachedEntry) rareOrNone() *rareEntryFields {
	if c.rare == nil {
		return &noRareFields
	}
	return c.rare
}

// compactEntry returns what the cache keeps of e, with its repeated parts shared through in:
// its ID and every field, as entryFields keep them. e is not kept.
func compactEntry(e *spiretypes.Entry, in *interner) *cachedEntry {
	c := &cachedEntry{}
	// The ID and the SPIFFE ID's path share one allocation: apart, a UUID and a path of 30 to
	// 40 bytes take two 48-byte size classes, together one of 80.
	joined := e.GetId() + e.GetSpiffeId().GetPath()
	c.id, c.path = joined[:len(e.GetId())], joined[len(e.GetId()):]
	for i := range entryFields {
		entryFields[i].keep(c, e, in)
	}
	return c
}

// entry returns the entry as a new message. Its parent ID, selectors and the slices of its
// rare fields are shared with the cache and must not be modified.
func (c *cachedEntry) entry() *spiretypes.Entry {
	e := &spiretypes.Entry{Id: c.id}
	for i := range entryFields {
		entryFields[i].restore(c, e)
	}
	return e
}

// interner shares among cached entries the parts many of them repeat: parent IDs (one per
// node), trust domains and selectors (a pod's UID selector is in the entry of every
// ClusterSPIFFEID that selects the pod; namespace and service account ones in many more).
// Shared parts are copies of the first entry's, and are never modified.
type interner struct {
	ids       map[spiffeIDKey]*spiretypes.SPIFFEID
	selectors map[selectorKey]*spiretypes.Selector
	strings   map[string]*string
}

type spiffeIDKey struct{ trustDomain, path string }

type selectorKey struct{ typ, value string }

func newInterner() *interner {
	return &interner{ids: map[spiffeIDKey]*spiretypes.SPIFFEID{}, selectors: map[selectorKey]*spiretypes.Selector{},
		strings: map[string]*string{}}
}

func (in *interner) spiffeID(id *spiretypes.SPIFFEID) *spiretypes.SPIFFEID {
	k := spiffeIDKey{id.GetTrustDomain(), id.GetPath()}
	if shared, ok := in.ids[k]; ok {
		return shared
	}
	// A copy: id belongs to the caller.
	shared := &spiretypes.SPIFFEID{TrustDomain: in.string(k.trustDomain), Path: k.path}
	in.ids[k] = shared
	return shared
}

func (in *interner) selector(s *spiretypes.Selector) *spiretypes.Selector {
	k := selectorKey{s.GetType(), s.GetValue()}
	if shared, ok := in.selectors[k]; ok {
		return shared
	}
	shared := &spiretypes.Selector{Type: in.string(k.typ), Value: k.value}
	in.selectors[k] = shared
	return shared
}

func (in *interner) string(s string) string {
	return *in.stringRef(s)
}

// stringRef returns a shared pointer to a string equal to s: 8 bytes where the string is 16.
func (in *interner) stringRef(s string) *string {
	if shared, ok := in.strings[s]; ok {
		return shared
	}
	shared := &s
	in.strings[s] = shared
	return shared
}
