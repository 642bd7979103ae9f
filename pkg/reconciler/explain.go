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

// This file exposes, for spire-registrar explain, the comparisons the reconciler decides with,
// so that explain never disagrees with it.

// OutdatedFields names, by their JSON names in SPIRE's API, the fields in which current, an
// entry SPIRE holds, differs from desired, a declared entry of the same key: the fields a sync
// would update. It is empty when current is up to date. Every optional field is compared, as
// against a server that keeps them all.
func OutdatedFields(current, desired *spiretypes.Entry) []string {
	mask := outdatedFields(current, desired, unsupportedFields{})
	if mask == nil {
		return nil
	}
	var fields []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"x509SvidTtl", mask.X509SvidTtl},
		{"jwtSvidTtl", mask.JwtSvidTtl},
		{"federatesWith", mask.FederatesWith},
		{"admin", mask.Admin},
		{"downstream", mask.Downstream},
		{"dnsNames", mask.DnsNames},
		{"hint", mask.Hint},
		{"storeSvid", mask.StoreSvid},
	} {
		if f.set {
			fields = append(fields, f.name)
		}
	}
	return fields
}

// Owns reports whether a reconciler with opts owns an entry: diffs, updates and deletes it.
// Entries it does not own (another entryIDPrefix, join-token agents) are invisible to it.
func Owns(opts Options, e *spiretypes.Entry) bool {
	return newOwnership(opts).owns(e)
}
