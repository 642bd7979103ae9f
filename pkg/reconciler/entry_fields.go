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
	"fmt"
	"slices"
	"strings"
	"sync"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// entryField is one field of SPIRE's Entry that the controller declares and writes.
type entryField struct {
	// name is the field's JSON name in SPIRE's API, as protojson, explain and the plan log
	// spell it.
	name string
	// key fields identify an entry (hash of SPIFFE ID, parent ID, selectors): an entry and
	// its declaration agree on them by construction, so only a replacement compares them.
	key bool
	// mask is the field's bit in an EntryMask.
	mask func(*spiretypes.EntryMask) *bool
	// differs reports whether a and b hold different values.
	differs func(a, b *spiretypes.Entry) bool
	// grants, when set, reports whether a grants through the field what b does not. Fields
	// without it shape how an identity is issued, not what it may do.
	grants func(a, b *spiretypes.Entry) bool
	// isSet, when set, marks a field older servers drop: one sent set and echoed unset is not
	// kept by the server, and is then never a reason to update.
	isSet func(*spiretypes.Entry) bool
	// value prints the field for a person.
	value func(*spiretypes.Entry) string
	// unlisted fields are not asked for when SPIRE is listed (spire.ListedEntryFields): the
	// controller never reads them from a listing.
	unlisted bool
	// keep copies the field of an entry into what the cache keeps of it, sharing repeated
	// parts through the interner; restore copies it back into a new entry.
	keep    func(c *cachedEntry, e *spiretypes.Entry, in *interner)
	restore func(c *cachedEntry, e *spiretypes.Entry)
}

// managed reports whether the controller declares and compares the field. The others are
// set by SPIRE (revisionNumber, createdAt, expiresAt) or an operator (additionalAttributes):
// the cache keeps them and a write never sends them.
func (f *entryField) managed() bool { return f.differs != nil }

// entryFields are the fields of SPIRE's Entry but its ID: the ones the controller manages
// first, in the order explain and the plan log list them, then the ones it only keeps. A field
// SPIRE adds to Entry is one more row (TestEntryFieldsAreSPIREs fails until it has one).
var entryFields = []entryField{
	{
		name: "spiffeId", key: true,
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.SpiffeId },
		differs: func(a, b *spiretypes.Entry) bool { return !proto.Equal(a.GetSpiffeId(), b.GetSpiffeId()) },
		value:   func(e *spiretypes.Entry) string { return render.SPIFFEIDString(e.GetSpiffeId()) },
		keep: func(c *cachedEntry, e *spiretypes.Entry, in *interner) {
			// The path is kept with the ID (see compactEntry).
			if id := e.GetSpiffeId(); id != nil {
				c.trustDomain = in.stringRef(id.GetTrustDomain())
			}
		},
		restore: func(c *cachedEntry, e *spiretypes.Entry) {
			if c.trustDomain != nil {
				e.SpiffeId = &spiretypes.SPIFFEID{TrustDomain: *c.trustDomain, Path: c.path}
			}
		},
	},
	{
		name: "parentId", key: true,
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.ParentId },
		differs: func(a, b *spiretypes.Entry) bool { return !proto.Equal(a.GetParentId(), b.GetParentId()) },
		value:   func(e *spiretypes.Entry) string { return render.SPIFFEIDString(e.GetParentId()) },
		keep: func(c *cachedEntry, e *spiretypes.Entry, in *interner) {
			if p := e.GetParentId(); p != nil {
				c.parent = in.spiffeID(p)
			}
		},
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.ParentId = c.parent },
	},
	{
		name: "selectors", key: true,
		mask: func(m *spiretypes.EntryMask) *bool { return &m.Selectors },
		differs: func(a, b *spiretypes.Entry) bool {
			return !sameSet(selectorStrings(a, "\x00"), selectorStrings(b, "\x00"))
		},
		value: func(e *spiretypes.Entry) string { return setString(selectorStrings(e, ":")) },
		keep: func(c *cachedEntry, e *spiretypes.Entry, in *interner) {
			if sels := e.GetSelectors(); len(sels) > 0 {
				c.selectors = make([]*spiretypes.Selector, len(sels))
				for i, s := range sels {
					c.selectors[i] = in.selector(s)
				}
			}
		},
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.Selectors = c.selectors },
	},
	{
		name:    "x509SvidTtl",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.X509SvidTtl },
		differs: func(a, b *spiretypes.Entry) bool { return a.GetX509SvidTtl() != b.GetX509SvidTtl() },
		value:   func(e *spiretypes.Entry) string { return fmt.Sprint(e.GetX509SvidTtl()) },
		keep:    func(c *cachedEntry, e *spiretypes.Entry, _ *interner) { c.x509SVIDTTL = e.GetX509SvidTtl() },
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.X509SvidTtl = c.x509SVIDTTL },
	},
	{
		name:    "jwtSvidTtl",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.JwtSvidTtl },
		differs: func(a, b *spiretypes.Entry) bool { return a.GetJwtSvidTtl() != b.GetJwtSvidTtl() },
		isSet:   func(e *spiretypes.Entry) bool { return e.GetJwtSvidTtl() != 0 },
		value:   func(e *spiretypes.Entry) string { return fmt.Sprint(e.GetJwtSvidTtl()) },
		keep:    func(c *cachedEntry, e *spiretypes.Entry, _ *interner) { c.jwtSVIDTTL = e.GetJwtSvidTtl() },
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.JwtSvidTtl = c.jwtSVIDTTL },
	},
	{
		// As a set, as spire-controller-manager compares it: an order it does not keep is no
		// reason to write.
		name:    "federatesWith",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.FederatesWith },
		differs: func(a, b *spiretypes.Entry) bool { return !sameSet(a.GetFederatesWith(), b.GetFederatesWith()) },
		grants:  func(a, b *spiretypes.Entry) bool { return !subset(a.GetFederatesWith(), b.GetFederatesWith()) },
		value:   func(e *spiretypes.Entry) string { return setString(e.GetFederatesWith()) },
		keep: func(c *cachedEntry, e *spiretypes.Entry, _ *interner) {
			if v := e.GetFederatesWith(); len(v) > 0 {
				c.rareFields().federatesWith = v
			}
		},
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.FederatesWith = c.rareOrNone().federatesWith },
	},
	{
		name:    "admin",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.Admin },
		differs: func(a, b *spiretypes.Entry) bool { return a.GetAdmin() != b.GetAdmin() },
		grants:  func(a, b *spiretypes.Entry) bool { return a.GetAdmin() && !b.GetAdmin() },
		value:   func(e *spiretypes.Entry) string { return fmt.Sprint(e.GetAdmin()) },
		keep:    func(c *cachedEntry, e *spiretypes.Entry, _ *interner) { c.admin = e.GetAdmin() },
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.Admin = c.admin },
	},
	{
		name:    "downstream",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.Downstream },
		differs: func(a, b *spiretypes.Entry) bool { return a.GetDownstream() != b.GetDownstream() },
		grants:  func(a, b *spiretypes.Entry) bool { return a.GetDownstream() && !b.GetDownstream() },
		value:   func(e *spiretypes.Entry) string { return fmt.Sprint(e.GetDownstream()) },
		keep:    func(c *cachedEntry, e *spiretypes.Entry, _ *interner) { c.downstream = e.GetDownstream() },
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.Downstream = c.downstream },
	},
	{
		// As a set: Service names and template order across versions are no reason to write.
		name:    "dnsNames",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.DnsNames },
		differs: func(a, b *spiretypes.Entry) bool { return !sameSet(a.GetDnsNames(), b.GetDnsNames()) },
		grants:  func(a, b *spiretypes.Entry) bool { return !subset(a.GetDnsNames(), b.GetDnsNames()) },
		value:   func(e *spiretypes.Entry) string { return setString(e.GetDnsNames()) },
		keep: func(c *cachedEntry, e *spiretypes.Entry, _ *interner) {
			if v := e.GetDnsNames(); len(v) > 0 {
				c.rareFields().dnsNames = v
			}
		},
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.DnsNames = c.rareOrNone().dnsNames },
	},
	{
		name:    "hint",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.Hint },
		differs: func(a, b *spiretypes.Entry) bool { return a.GetHint() != b.GetHint() },
		isSet:   func(e *spiretypes.Entry) bool { return e.GetHint() != "" },
		value:   func(e *spiretypes.Entry) string { return fmt.Sprintf("%q", e.GetHint()) },
		keep: func(c *cachedEntry, e *spiretypes.Entry, _ *interner) {
			if v := e.GetHint(); v != "" {
				c.rareFields().hint = v
			}
		},
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.Hint = c.rareOrNone().hint },
	},
	{
		name:    "storeSvid",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.StoreSvid },
		differs: func(a, b *spiretypes.Entry) bool { return a.GetStoreSvid() != b.GetStoreSvid() },
		isSet:   func(e *spiretypes.Entry) bool { return e.GetStoreSvid() },
		value:   func(e *spiretypes.Entry) string { return fmt.Sprint(e.GetStoreSvid()) },
		keep:    func(c *cachedEntry, e *spiretypes.Entry, _ *interner) { c.storeSVID = e.GetStoreSvid() },
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.StoreSvid = c.storeSVID },
	},
	{
		name:    "revisionNumber",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.RevisionNumber },
		keep:    func(c *cachedEntry, e *spiretypes.Entry, _ *interner) { c.revision = e.GetRevisionNumber() },
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.RevisionNumber = c.revision },
	},
	{
		name:    "createdAt",
		mask:    func(m *spiretypes.EntryMask) *bool { return &m.CreatedAt },
		keep:    func(c *cachedEntry, e *spiretypes.Entry, _ *interner) { c.createdAt = e.GetCreatedAt() },
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.CreatedAt = c.createdAt },
	},
	{
		name: "expiresAt", unlisted: true,
		mask: func(m *spiretypes.EntryMask) *bool { return &m.ExpiresAt },
		keep: func(c *cachedEntry, e *spiretypes.Entry, _ *interner) {
			if v := e.GetExpiresAt(); v != 0 {
				c.rareFields().expiresAt = v
			}
		},
		restore: func(c *cachedEntry, e *spiretypes.Entry) { e.ExpiresAt = c.rareOrNone().expiresAt },
	},
	{
		name: "additionalAttributes", unlisted: true,
		mask: func(m *spiretypes.EntryMask) *bool { return &m.AdditionalAttributes },
		keep: func(c *cachedEntry, e *spiretypes.Entry, _ *interner) {
			if e.AdditionalAttributes != nil {
				c.rareFields().additionalAttributes = e.AdditionalAttributes
			}
		},
		restore: func(c *cachedEntry, e *spiretypes.Entry) {
			e.AdditionalAttributes = c.rareOrNone().additionalAttributes
		},
	},
}

// diffMask returns the mask of the fields in which current differs from desired, key fields
// included when withKey, fields the server does not keep never; nil when there are none.
func diffMask(current, desired *spiretypes.Entry, unsupported unsupportedFields, withKey bool) *spiretypes.EntryMask {
	var mask *spiretypes.EntryMask
	for i, f := range entryFields {
		if !f.managed() || (f.key && !withKey) || unsupported.has(i) || !f.differs(current, desired) {
			continue
		}
		if mask == nil {
			mask = &spiretypes.EntryMask{}
		}
		*f.mask(mask) = true
	}
	return mask
}

// outdatedFields returns the mask of fields in which current, an entry of desired's key,
// differs from desired, or nil when it is up to date.
func outdatedFields(current, desired *spiretypes.Entry, unsupported unsupportedFields) *spiretypes.EntryMask {
	return diffMask(current, desired, unsupported, false)
}

// replacementMask is the mask that turns current, an entry of another identity, into desired:
// the fields that differ, never one that already holds its value, so that fields the
// controller does not manage (SPIRE 1.15's additional attributes) are never touched.
func replacementMask(current, desired *spiretypes.Entry, unsupported unsupportedFields) *spiretypes.EntryMask {
	if mask := diffMask(current, desired, unsupported, true); mask != nil {
		return mask
	}
	return &spiretypes.EntryMask{}
}

// grantsBeyond reports whether current, an entry of desired's key, grants what desired does
// not: admin or downstream, a trust domain to federate with, or a DNS name.
func grantsBeyond(current, desired *spiretypes.Entry) bool {
	return slices.ContainsFunc(entryFields, func(f entryField) bool { return f.grants != nil && f.grants(current, desired) })
}

// maskFields names the fields a mask selects.
func maskFields(m *spiretypes.EntryMask) []string {
	var names []string
	for _, f := range entryFields {
		if *f.mask(m) {
			names = append(names, f.name)
		}
	}
	return names
}

// maskKey is a comparable form of a mask, to group updates that share one.
func maskKey(m *spiretypes.EntryMask) uint64 {
	var key uint64
	for i, f := range entryFields {
		if *f.mask(m) {
			key |= 1 << i
		}
	}
	return key
}

// FieldChange is one field an update sets: its JSON name in SPIRE's API and its value in
// SPIRE's entry and in the declared one.
type FieldChange struct {
	Field, Current, Desired string
}

// Changes lists the fields the update sets, in entryFields' order.
func (u *EntryUpdate) Changes() []FieldChange {
	var out []FieldChange
	for _, f := range entryFields {
		if *f.mask(u.Mask) {
			out = append(out, FieldChange{Field: f.name, Current: f.value(u.Current), Desired: f.value(u.Desired.Entry)})
		}
	}
	return out
}

func selectorStrings(e *spiretypes.Entry, sep string) []string {
	out := make([]string, 0, len(e.GetSelectors()))
	for _, s := range e.GetSelectors() {
		out = append(out, s.GetType()+sep+s.GetValue())
	}
	return out
}

// sameSet compares two string lists ignoring order, as spire-controller-manager compares
// federatesWith and dnsNames: sorted, duplicates counted.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// subset reports whether every string of a is in b.
func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// setString prints a list whose order does not count, sorted.
func setString(s []string) string {
	return "[" + strings.Join(slices.Sorted(slices.Values(s)), " ") + "]"
}

// cloneEntry deep-copies an entry, since cached and declared entries are shared.
func cloneEntry(e *spiretypes.Entry) *spiretypes.Entry {
	return proto.Clone(e).(*spiretypes.Entry)
}

// unsupportedFields are the optional entry fields the connected SPIRE server does not keep,
// one bit per row of entryFields. Older servers drop jwtSvidTtl, hint and storeSvid; comparing
// them would update the same entries at every sync, for ever.
type unsupportedFields struct {
	bits uint64
}

// has reports whether the server does not keep entryFields[i].
func (u unsupportedFields) has(i int) bool {
	return u.bits&(1<<i) != 0
}

// fieldSupport learns which optional fields the server keeps from what it echoes back after
// the controller's own writes. Unlike spire-controller-manager, which creates and deletes a
// probe entry at every start, it writes nothing of its own.
type fieldSupport struct {
	mu          sync.Mutex
	unsupported unsupportedFields
}

// learn compares an entry as sent with the server's echo of it. A field sent set and echoed
// unset is not kept by the server; one echoed set is.
func (f *fieldSupport) learn(logger klog.Logger, sent, echoed *spiretypes.Entry) {
	if sent == nil || echoed == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, field := range entryFields {
		if field.isSet == nil || !field.isSet(sent) {
			continue
		}
		if unsupported := !field.isSet(echoed); unsupported != f.unsupported.has(i) {
			f.unsupported.bits ^= 1 << i
			logger.Info("Learned whether SPIRE keeps an entry field", "field", field.name, "kept", !unsupported)
		}
	}
}

// get returns the fields known not to be kept.
func (f *fieldSupport) get() unsupportedFields {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unsupported
}
