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

package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"golang.org/x/net/idna"
	"k8s.io/apimachinery/pkg/types"
)

// Declarer kinds, as named in Events and logs.
const (
	KindClusterSPIFFEID    = "ClusterSPIFFEID"
	KindClusterStaticEntry = "ClusterStaticEntry"
)

// PodUIDSelectorPrefix starts the k8s selector value that ties a pod entry to its pod. Every
// pod entry carries it, so a pod's entries are found, and owned, by the pod's UID alone.
const PodUIDSelectorPrefix = "pod-uid:"

// Key identifies an entry by what SPIRE itself treats as identity: SPIFFE ID, parent ID and
// the set of selectors. Two entries with one key are duplicates.
type Key string

// Declarer is the resource that asks for an entry. When several ask for the same entry one
// is preferred and the others are masked, by spire-controller-manager's rule (see Compare), so
// that both pick the same winner and the winner is stable across restarts.
type Declarer struct {
	Kind string
	Name string
	UID  types.UID
	// Created is the resource's creation time; Deleted its deletion time, zero unless it is
	// being deleted. Resources being deleted still declare entries until they are gone.
	Created time.Time
	Deleted time.Time
	// PodUID is set for entries rendered for a pod: it scopes the entry to that pod.
	PodUID types.UID
}

// Compare orders declarers most preferred first, as spire-controller-manager does: older
// first; then one not being deleted before one being deleted, and of two being deleted the
// one deleted later first; then the lower UID. ClusterSPIFFEIDs and ClusterStaticEntries
// compete by the same rule. Kind and name only make the order total for resources without
// UIDs.
func (d Declarer) Compare(other Declarer) int {
	return cmp.Or(
		d.Created.Compare(other.Created),
		compareDeletion(d.Deleted, other.Deleted),
		cmp.Compare(d.UID, other.UID),
		cmp.Compare(d.Kind, other.Kind),
		cmp.Compare(d.Name, other.Name))
}

// compareDeletion puts a resource not being deleted first, then the later deletion.
func compareDeletion(a, b time.Time) int {
	switch {
	case a.IsZero() && b.IsZero():
		return 0
	case a.IsZero():
		return -1
	case b.IsZero():
		return 1
	}
	return b.Compare(a)
}

// DeclaredEntry is one entry that a declarer wants SPIRE to hold.
type DeclaredEntry struct {
	Entry    *spiretypes.Entry
	Key      Key
	Declarer Declarer
}

// NewDeclaredEntry pairs an entry with its declarer and computes its key.
func NewDeclaredEntry(e *spiretypes.Entry, d Declarer) *DeclaredEntry {
	return &DeclaredEntry{Entry: e, Key: KeyOf(e), Declarer: d}
}

// KeyOf hashes an entry's identity. Selectors are sorted so their order does not matter.
// Every field is length-prefixed, so no content, not even a NUL, can shift one field into
// the next.
func KeyOf(e *spiretypes.Entry) Key {
	// One buffer, hashed at once: every resync keys every entry, at 300k entries a second of
	// CPU when each field was a string of its own fed to a hash.Hash.
	var buf [512]byte
	b := appendSPIFFEIDField(buf[:0], e.GetSpiffeId())
	b = appendSPIFFEIDField(b, e.GetParentId())
	switch sels := e.GetSelectors(); len(sels) {
	case 0:
	case 1:
		b = appendSelectorField(b, sels[0].GetType(), sels[0].GetValue())
	default:
		selectors := make([]string, 0, len(sels))
		for _, s := range sels {
			selectors = append(selectors, s.GetType()+":"+s.GetValue())
		}
		slices.Sort(selectors)
		for _, s := range selectors {
			b = appendField(b, s)
		}
	}
	sum := sha256.Sum256(b)
	return Key(hex.EncodeToString(sum[:]))
}

// appendField appends s, prefixed with its length as a uvarint.
func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendSPIFFEIDField appends SPIFFEIDString(id) as a field without building the string.
func appendSPIFFEIDField(b []byte, id *spiretypes.SPIFFEID) []byte {
	if id == nil {
		return appendField(b, "")
	}
	td, path := id.GetTrustDomain(), id.GetPath()
	b = binary.AppendUvarint(b, uint64(len("spiffe://")+len(td)+len(path)))
	return append(append(append(b, "spiffe://"...), td...), path...)
}

// appendSelectorField appends "type:value" as a field without building the string.
func appendSelectorField(b []byte, typ, value string) []byte {
	b = binary.AppendUvarint(b, uint64(len(typ)+1+len(value)))
	return append(append(append(b, typ...), ':'), value...)
}

// SPIFFEIDString renders SPIRE's split SPIFFE ID as a URI.
func SPIFFEIDString(id *spiretypes.SPIFFEID) string {
	if id == nil {
		return ""
	}
	return "spiffe://" + id.GetTrustDomain() + id.GetPath()
}

// PodUIDOf returns the UID a pod entry is scoped to, or "" for an entry of no pod.
func PodUIDOf(e *spiretypes.Entry) types.UID {
	for _, s := range e.GetSelectors() {
		if s.GetType() == "k8s" && strings.HasPrefix(s.GetValue(), PodUIDSelectorPrefix) {
			return types.UID(strings.TrimPrefix(s.GetValue(), PodUIDSelectorPrefix))
		}
	}
	return ""
}

// parseSelector parses "type:value". The value may contain colons (k8s:pod-label:app:web);
// the type may not, and neither part may be empty.
func parseSelector(s string) (*spiretypes.Selector, error) {
	typ, value, ok := strings.Cut(s, ":")
	switch {
	case !ok:
		return nil, fmt.Errorf("selector %q is not of the form type:value", s)
	case typ == "":
		return nil, fmt.Errorf("selector %q has an empty type", s)
	case value == "":
		return nil, fmt.Errorf("selector %q has an empty value", s)
	case strings.ContainsFunc(s, unicode.IsControl):
		// Control characters have no place in a selector, and NUL separates the fields of
		// an entry key.
		return nil, fmt.Errorf("selector %q contains a control character", s)
	}
	return &spiretypes.Selector{Type: typ, Value: value}, nil
}

// dnsProfile is the IDNA profile SPIRE 1.15.3 checks entry DNS names with
// (pkg/common/x509util.ValidateLabel), so that what renders is exactly what SPIRE accepts.
var dnsProfile = idna.New(
	idna.StrictDomainName(true),
	idna.ValidateLabels(true),
	idna.VerifyDNSLength(true),
	idna.CheckJoiners(true),
	idna.BidiRule(),
	idna.CheckHyphens(true),
)

// validateDNSName accepts the DNS names SPIRE accepts for an entry: ASCII, upper case included,
// with at most one wildcard, as the whole first label.
func validateDNSName(name string) error {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			return fmt.Errorf("invalid DNS name %q: not ASCII", name)
		}
	}
	rest := name
	if strings.Contains(name, "*") {
		var wildcard bool
		rest, wildcard = strings.CutPrefix(name, "*.")
		if !wildcard || strings.Contains(rest, "*") {
			return fmt.Errorf("invalid DNS name %q: a wildcard must be the whole first label, and the only one", name)
		}
	}
	rest = strings.TrimSpace(rest)
	switch {
	case rest == "":
		return fmt.Errorf("invalid DNS name %q: empty", name)
	case strings.HasSuffix(rest, "."):
		return fmt.Errorf("invalid DNS name %q: ends with a dot", name)
	}
	checked, err := dnsProfile.ToASCII(rest)
	if err != nil {
		return fmt.Errorf("invalid DNS name %q: %w", name, err)
	}
	if checked != rest {
		return fmt.Errorf("invalid DNS name %q: not in IDNA ASCII form", name)
	}
	return nil
}

// ttlSeconds converts a TTL to SPIRE's seconds, saturating instead of overflowing.
func ttlSeconds(d time.Duration) int32 {
	s := d / time.Second
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(s)
}

// dedupe drops repeated strings, keeping the first of each and the order: the first DNS name
// of an entry becomes the SVID's common name, so order matters.
func dedupe(values []string) []string {
	if len(values) < 2 {
		return values
	}
	seen := make(map[string]struct{}, len(values))
	out := values[:0:0]
	for _, v := range values {
		if _, ok := seen[v]; !ok {
			seen[v] = struct{}{}
			out = append(out, v)
		}
	}
	return out
}
