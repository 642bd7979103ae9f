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

package podcert

import (
	"strings"
	"testing"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// TestCheckIdentity: the IDs SPIRE refuses to register for a workload (idutil.IsReservedPath
// and an empty path, in spire v1.15.3's api.VerifyTrustDomainWorkloadID), the signer's own
// ID, and admin or downstream identities unless allowed.
func TestCheckIdentity(t *testing.T) {
	signer := spiffeid.RequireFromString("spiffe://example.org/spire-registrar")
	rules := IdentityRules{SignerID: signer}
	for _, tc := range []struct {
		name              string
		id                string
		admin, downstream bool
		rules             IdentityRules
		wantReason        Reason
		wantInMsg         string
	}{
		{name: "a workload", id: "spiffe://example.org/ns/default/sa/web"},
		{name: "a path that only starts with spire", id: "spiffe://example.org/spirelike/x"},
		{name: "an agent's", id: "spiffe://example.org/spire/agent/k8s_psat/c/n", wantReason: ReasonReservedSPIFFEID, wantInMsg: "under /spire"},
		{name: "the server's", id: "spiffe://example.org/spire/server", wantReason: ReasonReservedSPIFFEID, wantInMsg: "under /spire"},
		{name: "/spire itself", id: "spiffe://example.org/spire", wantReason: ReasonReservedSPIFFEID, wantInMsg: "under /spire"},
		{name: "the trust domain's", id: "spiffe://example.org", wantReason: ReasonReservedSPIFFEID, wantInMsg: "the trust domain's own ID"},
		{name: "the signer's own", id: signer.String(), wantReason: ReasonReservedSPIFFEID, wantInMsg: "the signer's own SPIFFE ID"},
		{name: "the signer's own, allowed nothing else", id: signer.String(), rules: IdentityRules{SignerID: signer, AllowAdmin: true, AllowDownstream: true},
			wantReason: ReasonReservedSPIFFEID},
		{name: "admin", id: "spiffe://example.org/ops", admin: true, wantReason: ReasonPrivilegedIdentity, wantInMsg: "podCertificates.allowAdminIdentities"},
		{name: "admin allowed", id: "spiffe://example.org/ops", admin: true, rules: IdentityRules{AllowAdmin: true}},
		{name: "downstream", id: "spiffe://example.org/ops", downstream: true, wantReason: ReasonPrivilegedIdentity, wantInMsg: "podCertificates.allowDownstreamIdentities"},
		{name: "downstream allowed", id: "spiffe://example.org/ops", downstream: true, rules: IdentityRules{AllowDownstream: true}},
		{name: "admin and downstream, admin allowed", id: "spiffe://example.org/ops", admin: true, downstream: true, rules: IdentityRules{AllowAdmin: true},
			wantReason: ReasonPrivilegedIdentity, wantInMsg: "allowDownstreamIdentities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rules
			if r == (IdentityRules{}) {
				r = rules
			}
			d := CheckIdentity(Identity{ClusterSPIFFEID: "c", SPIFFEID: spiffeid.RequireFromString(tc.id), Admin: tc.admin, Downstream: tc.downstream}, r)
			if tc.wantReason == "" {
				if d != nil {
					t.Fatalf("CheckIdentity = %+v, want nil", d)
				}
				return
			}
			if d == nil || d.Reason != tc.wantReason || d.Type() != "Denied" {
				t.Fatalf("CheckIdentity = %+v, want Denied %s", d, tc.wantReason)
			}
			if !strings.Contains(d.Message, tc.wantInMsg) || !strings.Contains(d.Message, "ClusterSPIFFEID c") {
				t.Errorf("message %q does not say %q and name the ClusterSPIFFEID", d.Message, tc.wantInMsg)
			}
		})
	}
}
