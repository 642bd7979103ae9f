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

// Reasons of the Ready condition (ConditionReady) and of the Events recorded on
// ClusterFederatedTrustDomains alone; ReasonInvalidSpec and ReasonWriteFailed, which every
// kind shares, are in conditions.go. Their values are what users' alerts and scripts match,
// so they never change.
const (
	// ReasonRelationshipSet: SPIRE holds the relationship as declared.
	ReasonRelationshipSet = "RelationshipSet"
	// ReasonRelationshipCreated: the relationship was created in SPIRE (Event).
	ReasonRelationshipCreated = "RelationshipCreated"
	// ReasonRelationshipUpdated: the relationship was updated in SPIRE (Event).
	ReasonRelationshipUpdated = "RelationshipUpdated"
	// ReasonFederationConflict: an older resource declares the same trust domain, and this
	// one is ignored.
	ReasonFederationConflict = "Conflict"
)
