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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterFederatedTrustDomain declares a SPIRE federation relationship with another trust domain.
type ClusterFederatedTrustDomain struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterFederatedTrustDomainSpec `json:"spec"`
	// +optional
	Status ClusterFederatedTrustDomainStatus `json:"status,omitempty"`
}

// ClusterFederatedTrustDomainSpec is the federation relationship as SPIRE should hold it.
type ClusterFederatedTrustDomainSpec struct {
	// TrustDomain is the name of the federated trust domain.
	TrustDomain string `json:"trustDomain"`
	// BundleEndpointURL is the https URL of the trust domain's bundle endpoint.
	BundleEndpointURL string `json:"bundleEndpointURL"`
	// BundleEndpointProfile says how the bundle endpoint authenticates itself.
	BundleEndpointProfile BundleEndpointProfile `json:"bundleEndpointProfile"`
	// TrustDomainBundle is the trust domain's bundle in SPIFFE bundle JSON, to bootstrap trust.
	// +optional
	TrustDomainBundle string `json:"trustDomainBundle,omitempty"`
	// ClassName names the controller class that acts on this object.
	// +optional
	ClassName string `json:"className,omitempty"`
}

// BundleEndpointProfileType is how a bundle endpoint authenticates.
type BundleEndpointProfileType string

const (
	// HTTPSWebProfileType authenticates the endpoint with Web PKI.
	HTTPSWebProfileType BundleEndpointProfileType = "https_web"
	// HTTPSSPIFFEProfileType authenticates the endpoint with an X509-SVID.
	HTTPSSPIFFEProfileType BundleEndpointProfileType = "https_spiffe"
)

// BundleEndpointProfile is the bundle endpoint's profile.
type BundleEndpointProfile struct {
	// Type is https_web or https_spiffe.
	Type BundleEndpointProfileType `json:"type"`
	// EndpointSPIFFEID is the endpoint's SPIFFE ID; required for https_spiffe only.
	// +optional
	EndpointSPIFFEID string `json:"endpointSPIFFEID,omitempty"`
}

// ClusterFederatedTrustDomainStatus is the observed state of a ClusterFederatedTrustDomain.
type ClusterFederatedTrustDomainStatus struct {
	// Conditions say whether SPIRE holds the relationship as declared (Ready), and if not, why.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterFederatedTrustDomainList is a list of ClusterFederatedTrustDomains.
type ClusterFederatedTrustDomainList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterFederatedTrustDomain `json:"items"`
}
