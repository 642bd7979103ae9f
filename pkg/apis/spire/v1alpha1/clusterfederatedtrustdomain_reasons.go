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

// ClusterFederatedTrustDomainReady is the type of the condition that says whether SPIRE holds
// the federation relationship a ClusterFederatedTrustDomain declares.
const ClusterFederatedTrustDomainReady = "Ready"

// Reasons of the Ready condition and of the Events recorded on ClusterFederatedTrustDomains.
// Their values are what users' alerts and scripts match, so they never change.
const (
	// ReasonRelationshipSet: SPIRE holds the relationship as declared.
	ReasonRelationshipSet = "RelationshipSet"
	// ReasonRelationshipCreated: the relationship was created in SPIRE (Event).
	ReasonRelationshipCreated = "RelationshipCreated"
	// ReasonRelationshipUpdated: the relationship was updated in SPIRE (Event).
	ReasonRelationshipUpdated = "RelationshipUpdated"
	// ReasonRelationshipWriteFailed: SPIRE refused the write; it is retried.
	ReasonRelationshipWriteFailed = "WriteFailed"
	// ReasonFederationInvalidSpec: the spec cannot be written to SPIRE; the relationship is
	// left as SPIRE holds it.
	ReasonFederationInvalidSpec = "InvalidSpec"
	// ReasonFederationConflict: an older resource declares the same trust domain, and this
	// one is ignored.
	ReasonFederationConflict = "Conflict"
)
