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

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// IdentityRules are what the config allows a pod certificate to carry beyond what SPIRE
// allows any workload.
type IdentityRules struct {
	// AllowAdmin and AllowDownstream let a ClusterSPIFFEID marked admin or downstream give
	// pods certificates (podCertificates.allowAdminIdentities, allowDownstreamIdentities).
	AllowAdmin, AllowDownstream bool
	// SignerID is the SPIFFE ID the signer itself authenticates to SPIRE with; zero when
	// unknown.
	SignerID spiffeid.ID
}

// Identity is the identity a ClusterSPIFFEID gives a pod: its SPIFFE ID, and whether the
// entry SPIRE would hold for it is admin or downstream.
type Identity struct {
	ClusterSPIFFEID   string
	SPIFFEID          spiffeid.ID
	Admin, Downstream bool
}

// CheckIdentity returns nil when a pod may get a certificate for id; else the decision to
// deny it. SPIRE authorizes callers by the entry of their SPIFFE ID, so a certificate for an
// ID is as good as that entry's rights: never the ID of a SPIRE server or agent (SPIRE keeps
// an empty path and paths under /spire for them, and registers no workload there), never the
// signer's own ID, and an admin or downstream entry's ID only when the config allows it.
func CheckIdentity(id Identity, rules IdentityRules) *Decision {
	path := id.SPIFFEID.Path()
	switch {
	case path == "":
		return Decide(ReasonReservedSPIFFEID, "ClusterSPIFFEID %s renders %s, the trust domain's own ID, which SPIRE gives no workload", id.ClusterSPIFFEID, quote(id.SPIFFEID.String()))
	case path == "/spire" || strings.HasPrefix(path, "/spire/"):
		return Decide(ReasonReservedSPIFFEID, "ClusterSPIFFEID %s renders %s, under /spire, which SPIRE reserves for its servers and agents", id.ClusterSPIFFEID, quote(id.SPIFFEID.String()))
	case !rules.SignerID.IsZero() && id.SPIFFEID == rules.SignerID:
		return Decide(ReasonReservedSPIFFEID, "ClusterSPIFFEID %s renders %s, the signer's own SPIFFE ID", id.ClusterSPIFFEID, quote(id.SPIFFEID.String()))
	case id.Admin && !rules.AllowAdmin:
		return Decide(ReasonPrivilegedIdentity, "ClusterSPIFFEID %s is admin; pod certificates for admin identities need podCertificates.allowAdminIdentities", id.ClusterSPIFFEID)
	case id.Downstream && !rules.AllowDownstream:
		return Decide(ReasonPrivilegedIdentity, "ClusterSPIFFEID %s is downstream; pod certificates for downstream identities need podCertificates.allowDownstreamIdentities", id.ClusterSPIFFEID)
	}
	return nil
}
