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

package federation

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// conditionReady is the condition type that says whether SPIRE holds the relationship.
const conditionReady = "Ready"

// readyConditions computes the Ready condition of every resource naming one trust domain from
// the problems reported on them and the result of writing the winner's relationship.
func readyConditions(cftds []*spirev1alpha1.ClusterFederatedTrustDomain, problems []problem, writeErr error) map[string]metav1.Condition {
	out := map[string]metav1.Condition{}
	for _, cftd := range cftds {
		out[cftd.Name] = metav1.Condition{Type: conditionReady, Status: metav1.ConditionTrue, ObservedGeneration: cftd.Generation,
			Reason: "RelationshipSet", Message: "SPIRE holds the federation relationship as declared"}
		if writeErr != nil {
			out[cftd.Name] = metav1.Condition{Type: conditionReady, Status: metav1.ConditionFalse, ObservedGeneration: cftd.Generation,
				Reason: "WriteFailed", Message: "SPIRE did not take the relationship (it is retried): " + truncate(writeErr.Error(), 1024)}
		}
	}
	for _, p := range problems {
		out[p.obj.Name] = metav1.Condition{Type: conditionReady, Status: metav1.ConditionFalse, ObservedGeneration: p.obj.Generation,
			Reason: p.reason, Message: truncate(p.message, 1024)}
	}
	return out
}

// writeStatus sets each resource's Ready condition, writing only those that changed.
func (c *Controller) writeStatus(ctx context.Context, cftds []*spirev1alpha1.ClusterFederatedTrustDomain, conditions map[string]metav1.Condition) error {
	if c.spireAPI == nil {
		return nil
	}
	var errs []error
	for _, cftd := range cftds {
		if cftd.DeletionTimestamp != nil || !c.opts.ClassMatches(cftd.Spec.ClassName) {
			continue
		}
		updated := cftd.DeepCopy()
		meta.SetStatusCondition(&updated.Status.Conditions, conditions[cftd.Name])
		if apiequality.Semantic.DeepEqual(cftd.Status, updated.Status) {
			continue
		}
		if _, err := c.spireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("updating status of ClusterFederatedTrustDomain %s: %w", cftd.Name, err))
			continue
		}
		klog.FromContext(ctx).V(2).Info("Updated ClusterFederatedTrustDomain status", "clusterFederatedTrustDomain", cftd.Name,
			"ready", conditions[cftd.Name].Status, "reason", conditions[cftd.Name].Reason)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}
