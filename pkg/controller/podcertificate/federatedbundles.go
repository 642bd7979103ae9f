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

package podcertificate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// FederatedAuthority is what the controller needs of SPIRE to publish federated trust: the
// X.509 authorities of each trust domain SPIRE federates with.
type FederatedAuthority interface {
	FederatedX509Authorities(ctx context.Context) (map[string][]spire.X509Authority, error)
}

// Federated trust is published under a signer name of its own, never the signer name of the
// pods' certificates: a pod that mounts every bundle of that signer name (an empty label
// selector) trusts its own trust domain only, as it did before federation was published. A
// pod trusts a federated trust domain only by naming the federated signer name, and, with
// the label spire.spiffe.io/trust-domain, the trust domains it wants, as a spire-agent gives
// a workload a federated bundle only when its entry federates with that trust domain.

// federatedBundleName names the ClusterTrustBundle of a federated trust domain: the federated
// signer name, with ":" for "/", then ":" and the trust domain; a trust domain that cannot
// end a bundle name (one with "_", or too long) is named by its hash instead, so that no two
// trust domains share a name.
func federatedBundleName(signerName, trustDomain string) string {
	suffix := trustDomain
	if len(apimachineryvalidation.NameIsDNSSubdomain(suffix, false)) > 0 {
		sum := sha256.Sum256([]byte(trustDomain))
		suffix = "td-" + hex.EncodeToString(sum[:10])
	}
	return strings.ReplaceAll(signerName, "/", ":") + ":" + suffix
}

// federatedBundles is the bundle of each federated trust domain that has X.509 authorities,
// by name. The own trust domain is never one of them.
func federatedBundles(signerName, ownTrustDomain string, authorities map[string][]spire.X509Authority) map[string]desiredBundle {
	out := make(map[string]desiredBundle, len(authorities))
	for td, auths := range authorities {
		if td == ownTrustDomain || len(auths) == 0 {
			continue
		}
		out[federatedBundleName(signerName, td)] = desiredBundle{trustDomain: td, pem: bundlePEM(auths)}
	}
	return out
}

// listFederated reads the X.509 authorities of the trust domains SPIRE federates with, for
// the next bundle sync. It does nothing without a federated signer name.
func (c *Controller) listFederated(ctx context.Context) error {
	if c.federatedAuthority == nil {
		return nil
	}
	authorities, err := c.federatedAuthority.FederatedX509Authorities(ctx)
	if err != nil {
		return fmt.Errorf("reading the bundles of the federated trust domains: %w", err)
	}
	c.federated.Store(&authorities)
	return nil
}
