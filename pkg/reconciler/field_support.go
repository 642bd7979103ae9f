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
	"sync"

	"k8s.io/klog/v2"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
)

// outdatedFields returns the mask of fields in which current differs from desired, or nil
// when it is up to date. The key fields (SPIFFE ID, parent ID, selectors) are equal by
// construction and not compared, and neither are fields the server does not keep.
func outdatedFields(current, desired *spiretypes.Entry, unsupported unsupportedFields) *spiretypes.EntryMask {
	mask := &spiretypes.EntryMask{
		X509SvidTtl:   current.GetX509SvidTtl() != desired.GetX509SvidTtl(),
		JwtSvidTtl:    !unsupported.jwtSVIDTTL && current.GetJwtSvidTtl() != desired.GetJwtSvidTtl(),
		FederatesWith: !sameSet(current.GetFederatesWith(), desired.GetFederatesWith()),
		Admin:         current.GetAdmin() != desired.GetAdmin(),
		Downstream:    current.GetDownstream() != desired.GetDownstream(),
		// As sets, as spire-controller-manager compares them: an order it does not keep
		// (Service names, template order across versions) is no reason to write.
		DnsNames:  !sameSet(current.GetDnsNames(), desired.GetDnsNames()),
		Hint:      !unsupported.hint && current.GetHint() != desired.GetHint(),
		StoreSvid: !unsupported.storeSVID && current.GetStoreSvid() != desired.GetStoreSvid(),
	}
	if !anyField(mask) {
		return nil
	}
	return mask
}

// grantsBeyond reports whether current, an entry of desired's key, grants what desired does
// not: admin or downstream, a trust domain to federate with, or a DNS name. The other fields
// shape how an identity is issued, not what it may do.
func grantsBeyond(current, desired *spiretypes.Entry) bool {
	return (current.GetAdmin() && !desired.GetAdmin()) ||
		(current.GetDownstream() && !desired.GetDownstream()) ||
		!subset(current.GetFederatesWith(), desired.GetFederatesWith()) ||
		!subset(current.GetDnsNames(), desired.GetDnsNames())
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

// anyField reports whether the mask selects any field.
func anyField(m *spiretypes.EntryMask) bool {
	return m.SpiffeId || m.ParentId || m.Selectors || m.X509SvidTtl || m.JwtSvidTtl ||
		m.FederatesWith || m.Admin || m.Downstream || m.DnsNames || m.Hint || m.StoreSvid
}

// maskKey is a comparable form of a mask, to group updates that share one.
func maskKey(m *spiretypes.EntryMask) string {
	return fmt.Sprint(m.SpiffeId, m.ParentId, m.Selectors, m.X509SvidTtl, m.JwtSvidTtl,
		m.FederatesWith, m.Admin, m.Downstream, m.DnsNames, m.Hint, m.StoreSvid)
}

// cloneEntry deep-copies an entry, since cached and declared entries are shared.
func cloneEntry(e *spiretypes.Entry) *spiretypes.Entry {
	return proto.Clone(e).(*spiretypes.Entry)
}

// replacementMask is the mask that turns current, an entry of another identity, into desired:
// the key fields that differ and the outdated fields, never one that already holds its value,
// so that fields the controller does not manage (SPIRE 1.15's additional attributes) are
// never touched.
func replacementMask(current, desired *spiretypes.Entry, unsupported unsupportedFields) *spiretypes.EntryMask {
	mask := outdatedFields(current, desired, unsupported)
	if mask == nil {
		mask = &spiretypes.EntryMask{}
	}
	mask.SpiffeId = !proto.Equal(current.GetSpiffeId(), desired.GetSpiffeId())
	mask.ParentId = !proto.Equal(current.GetParentId(), desired.GetParentId())
	mask.Selectors = !sameSet(selectorStrings(current), selectorStrings(desired))
	return mask
}

func selectorStrings(e *spiretypes.Entry) []string {
	out := make([]string, 0, len(e.GetSelectors()))
	for _, s := range e.GetSelectors() {
		out = append(out, s.GetType()+"\x00"+s.GetValue())
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

// unsupportedFields are the optional entry fields the connected SPIRE server does not keep.
// Older servers drop jwtSvidTtl, hint and storeSvid; comparing them would update the same
// entries at every sync, for ever.
type unsupportedFields struct {
	jwtSVIDTTL, hint, storeSVID bool
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
	update := func(name string, flag *bool, sentSet, echoedSet bool) {
		if !sentSet {
			return
		}
		if unsupported := !echoedSet; unsupported != *flag {
			*flag = unsupported
			logger.Info("Learned whether SPIRE keeps an entry field", "field", name, "kept", !unsupported)
		}
	}
	update("jwtSvidTtl", &f.unsupported.jwtSVIDTTL, sent.GetJwtSvidTtl() != 0, echoed.GetJwtSvidTtl() != 0)
	update("hint", &f.unsupported.hint, sent.GetHint() != "", echoed.GetHint() != "")
	update("storeSvid", &f.unsupported.storeSVID, sent.GetStoreSvid(), echoed.GetStoreSvid())
}

// get returns the fields known not to be kept.
func (f *fieldSupport) get() unsupportedFields {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unsupported
}
