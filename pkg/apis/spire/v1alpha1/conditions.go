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

// Condition types of the status of every kind.
const (
	// ConditionReady says whether SPIRE holds what a resource declares: the entries of a
	// ClusterSPIFFEID or a ClusterStaticEntry, the federation relationship of a
	// ClusterFederatedTrustDomain.
	ConditionReady = "Ready"
)

// Reasons of the Ready condition, also used as the reasons of the Events that explain them.
// The first two serve every kind; the reasons of ClusterFederatedTrustDomains alone are in
// clusterfederatedtrustdomain_reasons.go. Their values are what users' alerts and scripts
// match, so they never change.
const (
	// ReasonInvalidSpec: the spec cannot be rendered into any entry, or for a
	// ClusterFederatedTrustDomain cannot be written to SPIRE, which then keeps the
	// relationship it holds.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonRenderFailed: the templates render no valid entry for some selected pods.
	ReasonRenderFailed = "RenderFailed"
	// ReasonWriteFailed: SPIRE did not take some entries, or the relationship; they are
	// retried.
	ReasonWriteFailed = "WriteFailed"
	// ReasonMasked: an older resource declares the same entry, and that one is written.
	ReasonMasked = "Masked"
	// ReasonEntriesSet: SPIRE holds the entries of every pod a ClusterSPIFFEID selects.
	ReasonEntriesSet = "EntriesSet"
	// ReasonEntrySet: SPIRE holds the entry a ClusterStaticEntry declares.
	ReasonEntrySet = "EntrySet"
)
