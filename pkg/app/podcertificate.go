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

package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/controller/podcertificate"
	"github.com/spire-registrar/spire-registrar/pkg/podcert"
)

// podCertificateController adapts the pod certificate controller to the Controller interface.
type podCertificateController struct {
	*podcertificate.Controller
}

func (podCertificateController) Name() string { return podcertificate.ControllerName }

func newPodCertificateController(ctx context.Context, cc ControllerContext) (Controller, error) {
	cfg := cc.Config
	if err := cfg.CheckPodCertificatesConnection(); err != nil {
		return nil, err
	}
	if cc.Authority == nil {
		return nil, errors.New("podCertificates.enabled: the SPIRE client is not one dialled over mTLS, which NewDownstreamX509CA needs")
	}
	client := cc.PodCertificateClient
	if client == nil {
		client = cc.KubeClient
	}
	if err := canSign(ctx, client, cfg.PodCertificates.SignerName, cfg.PodCertificates.FederatedSignerName); err != nil {
		return nil, err
	}
	if cfg.PodCertificates.TrustNonNodeRequesters {
		klog.FromContext(ctx).Info("Signing PodCertificateRequests of any creator, not only of the pod's node (podCertificates.trustNonNodeRequesters)",
			"signerName", cfg.PodCertificates.SignerName)
	} else if err := podcertificate.CheckNodeOnlyPolicy(ctx, client, cfg.PodCertificates.SignerName); err != nil {
		return nil, err
	}
	identity, err := signerIdentity(cc.SPIREIdentity)
	if err != nil {
		return nil, err
	}
	narrowInformers(cc)
	requests, bundles := podCertificateInformers(cc)
	c, err := podcertificate.NewController(ctx, requests, bundles,
		cc.KubeInformers.Core().V1().Pods(),
		cc.KubeInformers.Core().V1().Namespaces(),
		cc.KubeInformers.Core().V1().Nodes(),
		cc.KubeInformers.Discovery().V1().EndpointSlices(),
		cc.SpireInformers.Spire().V1alpha1().ClusterSPIFFEIDs(),
		client, cc.Authority,
		podcertificate.Options{
			SignerName:            cfg.PodCertificates.SignerName,
			Settings:              renderSettings(cfg),
			IgnoreNamespace:       cfg.IsNamespaceIgnored,
			Class:                 cfg.Class(),
			ClusterSPIFFEIDLabels: cfg.ClusterSPIFFEIDLabels,
			CATTL:                 cfg.PodCertificates.CATTL,
			FailPendingAfter:      cfg.PodCertificates.FailPendingAfter,
			WaitForIdentity:       cfg.PodCertificates.WaitForIdentity,
			ResyncInterval:        cfg.GCInterval,
			MaxResyncShare:        cfg.MaxResyncShare,
			DefaultTTL:            cfg.PodCertificates.DefaultTTL,
			MaxTTL:                cfg.PodCertificates.MaxTTL,
			Identity: podcert.IdentityRules{
				AllowAdmin:      cfg.PodCertificates.AllowAdminIdentities,
				AllowDownstream: cfg.PodCertificates.AllowDownstreamIdentities,
				SignerID:        identity,
			},
			DryRun:              cc.DryRun,
			FederatedSignerName: cfg.PodCertificates.FederatedSignerName,
		})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("podCertificates.enabled: %w", err)
	}
	return podCertificateController{c}, nil
}

// signerIdentity is the SPIFFE ID the signer reaches SPIRE with, which it never issues to a
// pod; zero when it reaches SPIRE without one.
func signerIdentity(id string) (spiffeid.ID, error) {
	if id == "" {
		return spiffeid.ID{}, nil
	}
	parsed, err := spiffeid.FromString(id)
	if err != nil {
		return spiffeid.ID{}, fmt.Errorf("podCertificates.enabled: spire-registrar's own SPIFFE ID %q: %w", id, err)
	}
	return parsed, nil
}

// podCertificateInformers registers the informers of the PodCertificateRequests the
// controller reads, narrowed to the signer name by a field selector, and of the
// ClusterTrustBundles spire-registrar marked as its own, of every signer name: the
// controller's own and federated bundles among them, and those of other instances, which it
// reports.
func podCertificateInformers(cc ControllerContext) (certinformers.PodCertificateRequestInformer, certinformers.ClusterTrustBundleInformer) {
	bySigner := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", cc.Config.PodCertificates.SignerName).String()
	}
	marked := func(o *metav1.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(labels.Set{podcertificate.ManagedByLabel: podcertificate.ManagedBy}).String()
	}
	cc.KubeInformers.InformerFor(&certificatesv1.PodCertificateRequest{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		c := client.CertificatesV1().PodCertificateRequests(metav1.NamespaceAll)
		return relistable(&certificatesv1.PodCertificateRequest{}, client, c.List, c.Watch, bySigner, resync)
	})
	cc.KubeInformers.InformerFor(&certificatesv1.ClusterTrustBundle{}, func(client clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
		c := client.CertificatesV1().ClusterTrustBundles()
		return relistable(&certificatesv1.ClusterTrustBundle{}, client, c.List, c.Watch, marked, resync)
	})
	certs := cc.KubeInformers.Certificates().V1()
	return certs.PodCertificateRequests(), certs.ClusterTrustBundles()
}

// canSign fails when the credentials may not write what the signer writes: the status of
// PodCertificateRequests, with sign for the signer name, and ClusterTrustBundles, with
// attest for it and for the federated signer name if any. kube-apiserver would refuse every
// write; start-up says what to grant.
func canSign(ctx context.Context, kube clientset.Interface, signerName, federatedSignerName string) error {
	checks := []authorizationv1.ResourceAttributes{
		{Verb: "sign", Group: certificatesv1.GroupName, Resource: "signers", Name: signerName},
		{Verb: "attest", Group: certificatesv1.GroupName, Resource: "signers", Name: signerName},
		{Verb: "update", Group: certificatesv1.GroupName, Resource: "podcertificaterequests", Subresource: "status"},
		{Verb: "create", Group: certificatesv1.GroupName, Resource: "clustertrustbundles"},
	}
	if federatedSignerName != "" {
		checks = append(checks, authorizationv1.ResourceAttributes{Verb: "attest", Group: certificatesv1.GroupName, Resource: "signers", Name: federatedSignerName})
	}
	ok, err := allowed(ctx, kube, "pod certificates may be signed", checks...)
	switch {
	case err != nil:
		return fmt.Errorf("podCertificates.enabled: %w", err)
	case !ok && federatedSignerName != "":
		return fmt.Errorf("podCertificates.enabled: the credentials may not sign PodCertificateRequests or attest ClusterTrustBundles for signer %s, or attest for podCertificates.federatedSignerName %s: "+
			"grant the ClusterRole of manifests/pod-certificates (sign and attest on signers %s, attest on signers %s, update on podcertificaterequests/status, "+
			"clustertrustbundles create, update and delete)", signerName, federatedSignerName, signerName, federatedSignerName)
	case !ok:
		return fmt.Errorf("podCertificates.enabled: the credentials may not sign PodCertificateRequests or attest ClusterTrustBundles for signer %s: "+
			"grant the ClusterRole of manifests/pod-certificates (sign and attest on signers %s, update on podcertificaterequests/status, "+
			"clustertrustbundles create, update and delete)", signerName, signerName)
	}
	return nil
}
