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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
)

// readyConditions computes the Ready condition of every resource naming one trust domain from
// the problems reported on them and the result of writing the winner's relationship.
func readyConditions(cftds []*spirev1alpha1.ClusterFederatedTrustDomain, problems []fedreconciler.Problem, writeErr error) map[string]metav1.Condition {
	out := map[string]metav1.Condition{}
	for _, cftd := range cftds {
		out[cftd.Name] = metav1.Condition{Type: spirev1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			ObservedGeneration: cftd.Generation, Reason: spirev1alpha1.ReasonRelationshipSet,
			Message: "SPIRE holds the federation relationship as declared"}
		if writeErr != nil {
			out[cftd.Name] = metav1.Condition{Type: spirev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				ObservedGeneration: cftd.Generation, Reason: spirev1alpha1.ReasonWriteFailed,
				Message: "SPIRE did not take the relationship (it is retried): " + runner.Truncate(writeErr.Error(), 1024)}
		}
	}
	for _, p := range problems {
		out[p.Object.Name] = metav1.Condition{Type: spirev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			ObservedGeneration: p.Object.Generation, Reason: p.Reason, Message: runner.Truncate(p.Message, 1024)}
	}
	return out
}

// writesStatus reports whether status may be written: never without an API (static mode) or
// in a dry run, which writes nothing anywhere. The entry controller has the same rule.
func (c *Controller) writesStatus() bool {
	return c.spireAPI != nil && !c.opts.DryRun
}

// writeStatus sets the Ready condition of each resource of this controller's class.
func (c *Controller) writeStatus(ctx context.Context, cftds []*spirev1alpha1.ClusterFederatedTrustDomain, conditions map[string]metav1.Condition) error {
	var errs []error
	for _, cftd := range cftds {
		if cftd.DeletionTimestamp != nil || !c.opts.Class.Matches(cftd.Spec.ClassName) {
			continue
		}
		if err := c.updateClusterFederatedTrustDomainStatus(ctx, cftd, conditions[cftd.Name]); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// updateClusterFederatedTrustDomainStatus is the one function that writes the status of a
// ClusterFederatedTrustDomain. It writes only when the condition changes the status, and
// never in a dry run or without a client.
func (c *Controller) updateClusterFederatedTrustDomainStatus(ctx context.Context, cftd *spirev1alpha1.ClusterFederatedTrustDomain, ready metav1.Condition) error {
	if !c.writesStatus() {
		return nil
	}
	updated := cftd.DeepCopy()
	c.conditions.Set(&updated.Status.Conditions, ready)
	if apiequality.Semantic.DeepEqual(cftd.Status, updated.Status) {
		return nil
	}
	logger := klog.FromContext(ctx)
	echo, err := c.spireAPI.SpireV1alpha1().ClusterFederatedTrustDomains().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating status of ClusterFederatedTrustDomain %s: %w", cftd.Name, err)
	}
	c.conditions.Learn(updated.Status.Conditions, echo.Status.Conditions)
	logger.V(2).Info("Updated ClusterFederatedTrustDomain status", "clusterFederatedTrustDomain", klog.KObj(cftd),
		"ready", ready.Status, "reason", ready.Reason)
	return nil
}
