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

// ClusterSPIFFEID is an identity template: every pod it selects gets one SPIRE registration
// entry rendered from the templates in its spec.
type ClusterSPIFFEID struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterSPIFFEIDSpec `json:"spec"`
	// +optional
	Status ClusterSPIFFEIDStatus `json:"status,omitempty"`
}

// ClusterSPIFFEIDSpec is the desired state of a ClusterSPIFFEID. The templates are Go
// text/templates over .TrustDomain, .ClusterName, .ClusterDomain, .PodMeta, .PodSpec,
// .NodeMeta and .NodeSpec.
type ClusterSPIFFEIDSpec struct {
	// SPIFFEIDTemplate renders the SPIFFE ID of each selected pod's entry.
	SPIFFEIDTemplate string `json:"spiffeIDTemplate"`

	// Hint is copied to the entry to help workloads pick between several identities.
	// +optional
	Hint string `json:"hint,omitempty"`

	// NamespaceSelector selects the namespaces whose pods this ClusterSPIFFEID applies to.
	// Unset selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// PodSelector selects the pods, in the selected namespaces, this ClusterSPIFFEID applies
	// to. Unset selects every pod.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// TTL is the upper bound of the X509-SVID lifetime; zero lets SPIRE choose.
	// +optional
	TTL metav1.Duration `json:"ttl,omitempty"`

	// JWTTTL is the upper bound of the JWT-SVID lifetime; zero lets SPIRE choose.
	// +optional
	JWTTTL metav1.Duration `json:"jwtTtl,omitempty"`

	// DNSNameTemplates render extra DNS names for the SVIDs.
	// +optional
	DNSNameTemplates []string `json:"dnsNameTemplates,omitempty"`

	// WorkloadSelectorTemplates render extra workload selectors, each "type:value", that a
	// workload must also match. The value may itself contain colons.
	// +optional
	WorkloadSelectorTemplates []string `json:"workloadSelectorTemplates,omitempty"`

	// FederatesWith lists the trust domains whose bundles the workloads receive.
	// +optional
	FederatesWith []string `json:"federatesWith,omitempty"`

	// Admin grants the SVID access to SPIRE's administrative APIs.
	// +optional
	Admin bool `json:"admin,omitempty"`

	// Downstream marks the workload as a downstream SPIRE server.
	// +optional
	Downstream bool `json:"downstream,omitempty"`

	// AutoPopulateDNSNames adds the DNS names of the Services whose endpoints target the pod.
	// +optional
	AutoPopulateDNSNames bool `json:"autoPopulateDNSNames,omitempty"`

	// ClassName names the controller class that acts on this object.
	// +optional
	ClassName string `json:"className,omitempty"`

	// Fallback applies this identity only to pods that no non-fallback ClusterSPIFFEID selects.
	// +optional
	Fallback bool `json:"fallback,omitempty"`
}

// ClusterSPIFFEIDStatus is the observed state of a ClusterSPIFFEID.
type ClusterSPIFFEIDStatus struct {
	// Stats counts what the controller found and did for this ClusterSPIFFEID.
	// +optional
	Stats ClusterSPIFFEIDStats `json:"stats"`

	// Conditions say whether every selected pod has its entry (Ready), and if not, why.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterSPIFFEIDStats are the reconciliation counters of a ClusterSPIFFEID.
type ClusterSPIFFEIDStats struct {
	// NamespacesSelected counts the namespaces the namespace selector matched.
	// +optional
	NamespacesSelected int `json:"namespacesSelected"`
	// NamespacesIgnored counts the selected namespaces skipped by ignoreNamespaces.
	// +optional
	NamespacesIgnored int `json:"namespacesIgnored"`
	// PodsSelected counts the pods selected in the selected namespaces.
	// +optional
	PodsSelected int `json:"podsSelected"`
	// PodEntryRenderFailures counts selected pods whose entry could not be rendered, from a
	// broken template or from pod data that renders an invalid entry.
	// +optional
	PodEntryRenderFailures int `json:"podEntryRenderFailures"`
	// EntriesMasked counts entries masked by an older declaration of the same entry.
	// +optional
	EntriesMasked int `json:"entriesMasked"`
	// EntriesToSet counts entries this ClusterSPIFFEID declares and owns.
	// +optional
	EntriesToSet int `json:"entriesToSet"`
	// EntryFailures counts entries that SPIRE failed to create or update.
	// +optional
	EntryFailures int `json:"entryFailures"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterSPIFFEIDList is a list of ClusterSPIFFEIDs.
type ClusterSPIFFEIDList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterSPIFFEID `json:"items"`
}
