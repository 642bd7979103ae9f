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

// ClusterStaticEntry declares one literal SPIRE registration entry.
type ClusterStaticEntry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterStaticEntrySpec `json:"spec"`
	// +optional
	Status ClusterStaticEntryStatus `json:"status,omitempty"`
}

// ClusterStaticEntrySpec is the entry as SPIRE should hold it.
type ClusterStaticEntrySpec struct {
	SPIFFEID  string   `json:"spiffeID"`
	ParentID  string   `json:"parentID"`
	Selectors []string `json:"selectors"`
	// +optional
	FederatesWith []string `json:"federatesWith,omitempty"`
	// +optional
	X509SVIDTTL metav1.Duration `json:"x509SVIDTTL,omitempty"`
	// +optional
	JWTSVIDTTL metav1.Duration `json:"jwtSVIDTTL,omitempty"`
	// +optional
	DNSNames []string `json:"dnsNames,omitempty"`
	// +optional
	Hint string `json:"hint,omitempty"`
	// +optional
	Admin bool `json:"admin,omitempty"`
	// +optional
	Downstream bool `json:"downstream,omitempty"`
	// +optional
	StoreSVID bool `json:"storeSVID,omitempty"`
	// +optional
	ClassName string `json:"className,omitempty"`
}

// ClusterStaticEntryStatus reports what became of the declared entry.
type ClusterStaticEntryStatus struct {
	// Rendered is true when the spec is a valid entry.
	Rendered bool `json:"rendered"`
	// Masked is true when an older declaration of the same entry wins.
	Masked bool `json:"masked"`
	// Set is true when SPIRE holds the entry as declared.
	Set bool `json:"set"`

	// Conditions say whether SPIRE holds the entry (Ready), and if not, why.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterStaticEntryList is a list of ClusterStaticEntries.
type ClusterStaticEntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterStaticEntry `json:"items"`
}
