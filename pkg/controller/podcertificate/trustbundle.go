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
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
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

// syncBundle makes the ClusterTrustBundles of the signer name hold exactly SPIRE's X.509
// authorities as last listed: one bundle of this controller's, and no other of the signer
// name, since pods that mount the signer's bundles by signer name would trust its roots too.
// Nothing is done before SPIRE was first listed.
func (c *Controller) syncBundle(ctx context.Context, _ string) error {
	authorities := c.ca.currentAuthorities()
	if len(authorities) == 0 {
		return nil
	}
	want := bundlePEM(authorities)
	name := bundleName(c.opts.SignerName, c.opts.TrustDomain.Name())
	all, err := c.bundles.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing ClusterTrustBundles: %w", err)
	}
	logger := klog.FromContext(ctx)
	bundles := c.client.CertificatesV1().ClusterTrustBundles()
	found := false
	for _, b := range all {
		if b.Spec.SignerName != c.opts.SignerName {
			continue
		}
		switch {
		case b.Name != name:
			if c.opts.DryRun {
				logger.Info("Dry run: would delete ClusterTrustBundle", "clusterTrustBundle", b.Name)
				continue
			}
			if err := bundles.Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting ClusterTrustBundle %s of signer %s: %w", b.Name, c.opts.SignerName, err)
			}
			logger.Info("Deleted a ClusterTrustBundle of the signer name that is not SPIRE's", "clusterTrustBundle", b.Name)
		case b.Spec.TrustBundle != want:
			found = true
			if c.opts.DryRun {
				logger.Info("Dry run: would update ClusterTrustBundle", "clusterTrustBundle", name, "authorities", len(authorities))
				continue
			}
			updated := b.DeepCopy()
			updated.Spec.TrustBundle = want
			if _, err := bundles.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("updating ClusterTrustBundle %s: %w", name, err)
			}
			logger.Info("Updated the ClusterTrustBundle with SPIRE's X.509 authorities", "clusterTrustBundle", name, "authorities", len(authorities))
		default:
			found = true
		}
	}
	if found {
		return nil
	}
	if c.opts.DryRun {
		logger.Info("Dry run: would create ClusterTrustBundle", "clusterTrustBundle", name, "authorities", len(authorities))
		return nil
	}
	_, err = bundles.Create(ctx, &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "spire-registrar"}},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: c.opts.SignerName, TrustBundle: want},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating ClusterTrustBundle %s: %w", name, err)
	}
	logger.Info("Created the ClusterTrustBundle of SPIRE's X.509 authorities", "clusterTrustBundle", name, "authorities", len(authorities))
	return nil
}
