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
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// The marks of the ClusterTrustBundles spire-registrar publishes. The owner marks name the
// instance that publishes a bundle: its trust domain and className. An instance writes and
// deletes only bundles that carry its own owner marks.
const (
	// ManagedByLabel, with the value ManagedBy, marks a bundle as spire-registrar's. Bundles
	// without it are never touched.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "spire-registrar"
	// OwnerTrustDomainAnnotation is the trust domain of the instance that publishes the
	// bundle; OwnerClassNameAnnotation its className ("" when classless).
	OwnerTrustDomainAnnotation = "spire.spiffe.io/owner-trust-domain"
	OwnerClassNameAnnotation   = "spire.spiffe.io/owner-class-name"
	// TrustDomainLabel is the trust domain whose X.509 authorities the bundle holds, for pods
	// to select bundles by (a clusterTrustBundle volume source's labelSelector). It is left
	// out for a trust domain that is not a valid label value (over 63 characters);
	// TrustDomainAnnotation always holds it.
	TrustDomainLabel      = "spire.spiffe.io/trust-domain"
	TrustDomainAnnotation = "spire.spiffe.io/trust-domain"
)

// bundleOwner is the instance of spire-registrar a bundle belongs to.
type bundleOwner struct {
	trustDomain string
	className   string
}

func (o bundleOwner) String() string {
	return fmt.Sprintf("trust domain %s, className %q", o.trustDomain, o.className)
}

// ownership is whose a ClusterTrustBundle of one of the signer names is.
type ownership int

const (
	// notOurs: a bundle without spire-registrar's marks, of someone else's making.
	notOurs ownership = iota
	// ours: a bundle of this instance's.
	ours
	// anotherInstance: a bundle of another spire-registrar, of another trust domain or class.
	anotherInstance
)

// ownershipOf says whose b is, for the instance self. ownName is the name self gives its own
// trust domain's bundle: a bundle spire-registrar marked before it had owner marks is self's
// when it has that name, and another instance's otherwise.
func ownershipOf(b *certificatesv1.ClusterTrustBundle, self bundleOwner, ownName string) (ownership, bundleOwner) {
	if b.Labels[ManagedByLabel] != ManagedBy {
		return notOurs, bundleOwner{}
	}
	td, marked := b.Annotations[OwnerTrustDomainAnnotation]
	if !marked {
		if b.Name == ownName {
			return ours, self
		}
		return anotherInstance, bundleOwner{trustDomain: "unknown (published before owner marks)"}
	}
	owner := bundleOwner{trustDomain: td, className: b.Annotations[OwnerClassNameAnnotation]}
	if owner == self {
		return ours, owner
	}
	return anotherInstance, owner
}

// markedBundle is a ClusterTrustBundle as this instance publishes it: for signerName, named
// name, holding the authorities of trustDomain in PEM, with the marks of self.
func markedBundle(name, signerName, trustDomain, pemBundle string, self bundleOwner) *certificatesv1.ClusterTrustBundle {
	b := &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: pemBundle},
	}
	setMarks(&b.ObjectMeta, trustDomain, self)
	return b
}

// setMarks puts the marks of self and of the bundle's trust domain on meta, keeping the
// labels and annotations others put there.
func setMarks(meta *metav1.ObjectMeta, trustDomain string, self bundleOwner) {
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Labels[ManagedByLabel] = ManagedBy
	if len(validation.IsValidLabelValue(trustDomain)) == 0 {
		meta.Labels[TrustDomainLabel] = trustDomain
	} else {
		delete(meta.Labels, TrustDomainLabel)
	}
	meta.Annotations[TrustDomainAnnotation] = trustDomain
	meta.Annotations[OwnerTrustDomainAnnotation] = self.trustDomain
	meta.Annotations[OwnerClassNameAnnotation] = self.className
}

// hasMarks reports whether meta carries the marks setMarks puts.
func hasMarks(meta metav1.ObjectMeta, trustDomain string, self bundleOwner) bool {
	want := metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{}}
	setMarks(&want, trustDomain, self)
	for k, v := range want.Labels {
		if got, ok := meta.Labels[k]; !ok || got != v {
			return false
		}
	}
	if _, ok := want.Labels[TrustDomainLabel]; !ok {
		if _, stray := meta.Labels[TrustDomainLabel]; stray {
			return false
		}
	}
	for k, v := range want.Annotations {
		if got, ok := meta.Annotations[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// owner is this instance, as its bundles' owner marks name it.
func (c *Controller) owner() bundleOwner {
	return bundleOwner{trustDomain: c.opts.TrustDomain.Name(), className: c.opts.Class.Name}
}

// signerNames are the signer names this instance publishes bundles for.
func (c *Controller) signerNames() []string {
	if c.opts.FederatedSignerName == "" {
		return []string{c.opts.SignerName}
	}
	return []string{c.opts.SignerName, c.opts.FederatedSignerName}
}

// checkBundleOwners refuses to serve a signer name another spire-registrar publishes bundles
// for: another trust domain's or class's bundles of the signer name would be trusted by the
// pods of both, and each instance would take the other's requests. It reads the API server,
// since it runs before the informers. Bundles without spire-registrar's marks are left to
// their makers, and logged: pods that mount every bundle of the signer name trust them too.
func (c *Controller) checkBundleOwners(ctx context.Context) error {
	self := c.owner()
	ownName := bundleName(c.opts.SignerName, self.trustDomain)
	var conflicts []string
	for _, signer := range c.signerNames() {
		list, err := c.client.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.signerName", signer).String(),
		})
		if err != nil {
			return fmt.Errorf("listing the ClusterTrustBundles of signer %s: %w", signer, err)
		}
		for i := range list.Items {
			b := &list.Items[i]
			switch whose, owner := ownershipOf(b, self, ownName); whose {
			case anotherInstance:
				conflicts = append(conflicts, fmt.Sprintf("ClusterTrustBundle %s of signer %s belongs to another spire-registrar (%s), this one is %s", b.Name, signer, owner, self))
			case notOurs:
				klog.FromContext(ctx).Info("Warning: a ClusterTrustBundle of the signer name was not published by spire-registrar; it is left alone, and pods that mount every bundle of the signer name trust it too",
					"clusterTrustBundle", b.Name, "signerName", signer)
			}
		}
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("%s; give each trust domain and className its own podCertificates.signerName and federatedSignerName", strings.Join(conflicts, "; "))
	}
	return nil
}
