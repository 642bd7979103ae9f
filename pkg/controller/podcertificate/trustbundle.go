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
	"bytes"
	"cmp"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// bundleName names the ClusterTrustBundle of a signer for a trust domain: Kubernetes wants
// the signer name, with ":" for "/", and ":" before a DNS subdomain.
func bundleName(signerName, trustDomain string) string {
	suffix := trustDomain
	if len(apimachineryvalidation.NameIsDNSSubdomain(suffix, false)) > 0 {
		suffix = "trust-bundle"
	}
	return strings.ReplaceAll(signerName, "/", ":") + ":" + suffix
}

// bundlePEM is the trust bundle of authorities: their certificates in PEM, oldest first, so
// that the same authorities always give the same bundle.
func bundlePEM(authorities []spire.X509Authority) string {
	sorted := slices.Clone(authorities)
	slices.SortFunc(sorted, func(a, b spire.X509Authority) int {
		return cmp.Or(a.Certificate.NotBefore.Compare(b.Certificate.NotBefore), bytes.Compare(a.Certificate.Raw, b.Certificate.Raw))
	})
	var b strings.Builder
	for _, a := range sorted {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: a.Certificate.Raw})
	}
	return b.String()
}

// desiredBundle is what one ClusterTrustBundle of this instance's must hold.
type desiredBundle struct {
	trustDomain string
	pem         string
}

// syncBundle brings this instance's ClusterTrustBundles up to date with SPIRE, as last
// listed: one of the signer name for SPIRE's own X.509 authorities, and, with a federated
// signer name, one of it for each trust domain SPIRE federates with. Each set is left as it
// is until SPIRE was first listed for it. Bundles another spire-registrar published are
// reported, never touched, and so are bundles without spire-registrar's marks.
func (c *Controller) syncBundle(ctx context.Context, _ string) error {
	var errs []error
	if authorities := c.ca.currentAuthorities(); len(authorities) > 0 {
		td := c.opts.TrustDomain.Name()
		errs = append(errs, c.syncSignerBundles(ctx, c.opts.SignerName, map[string]desiredBundle{
			bundleName(c.opts.SignerName, td): {trustDomain: td, pem: bundlePEM(authorities)},
		}))
	}
	if federated := c.federated.Load(); federated != nil && c.opts.FederatedSignerName != "" {
		errs = append(errs, c.syncSignerBundles(ctx, c.opts.FederatedSignerName, federatedBundles(c.opts.FederatedSignerName, c.opts.TrustDomain.Name(), *federated)))
	}
	return errors.Join(errs...)
}

// syncSignerBundles makes this instance's ClusterTrustBundles of signer exactly want, by
// name: it creates and updates those of want, and deletes the others it owns.
func (c *Controller) syncSignerBundles(ctx context.Context, signer string, want map[string]desiredBundle) error {
	all, err := c.bundles.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing ClusterTrustBundles: %w", err)
	}
	self := c.owner()
	ownName := bundleName(c.opts.SignerName, self.trustDomain)
	logger := klog.FromContext(ctx)
	bundles := c.client.CertificatesV1().ClusterTrustBundles()
	var foreign []string
	found := map[string]bool{}
	for _, b := range all {
		if b.Spec.SignerName != signer {
			continue
		}
		whose, owner := ownershipOf(b, self, ownName)
		switch {
		case whose == anotherInstance:
			foreign = append(foreign, fmt.Sprintf("%s (%s)", b.Name, owner))
			continue
		case whose == notOurs:
			continue
		}
		d, wanted := want[b.Name]
		if !wanted {
			if c.opts.DryRun {
				logger.Info("Dry run: would delete ClusterTrustBundle", "clusterTrustBundle", b.Name)
				continue
			}
			if err := bundles.Delete(ctx, b.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &b.UID}}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting ClusterTrustBundle %s of signer %s: %w", b.Name, signer, err)
			}
			logger.Info("Deleted a ClusterTrustBundle of ours that SPIRE no longer backs", "clusterTrustBundle", b.Name)
			continue
		}
		found[b.Name] = true
		if b.Spec.TrustBundle == d.pem && hasMarks(b.ObjectMeta, d.trustDomain, self) {
			continue
		}
		if c.opts.DryRun {
			logger.Info("Dry run: would update ClusterTrustBundle", "clusterTrustBundle", b.Name, "trustDomain", d.trustDomain)
			continue
		}
		updated := b.DeepCopy()
		updated.Spec.TrustBundle = d.pem
		setMarks(&updated.ObjectMeta, d.trustDomain, self)
		if _, err := bundles.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating ClusterTrustBundle %s: %w", b.Name, err)
		}
		logger.Info("Updated the ClusterTrustBundle with SPIRE's X.509 authorities", "clusterTrustBundle", b.Name, "trustDomain", d.trustDomain)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if found[name] {
			continue
		}
		d := want[name]
		if c.opts.DryRun {
			logger.Info("Dry run: would create ClusterTrustBundle", "clusterTrustBundle", name, "trustDomain", d.trustDomain)
			continue
		}
		if _, err := bundles.Create(ctx, markedBundle(name, signer, d.trustDomain, d.pem, self), metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating ClusterTrustBundle %s: one of that name exists without this spire-registrar's marks (%s=%s, %s); it is left alone", name, ManagedByLabel, ManagedBy, self)
			}
			return fmt.Errorf("creating ClusterTrustBundle %s: %w", name, err)
		}
		logger.Info("Created the ClusterTrustBundle of SPIRE's X.509 authorities", "clusterTrustBundle", name, "trustDomain", d.trustDomain)
	}
	if len(foreign) > 0 {
		slices.Sort(foreign)
		return fmt.Errorf("ClusterTrustBundles of signer %s belong to another spire-registrar and are left alone: %s; give each trust domain and className its own signer name", signer, strings.Join(foreign, ", "))
	}
	return nil
}
