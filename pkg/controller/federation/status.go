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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	spireclientset "github.com/spire-registrar/spire-registrar/generated/clientset/versioned"
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

// writeStatus sets the Ready condition of each resource of this controller's class.
func (c *Controller) writeStatus(ctx context.Context, cftds []*spirev1alpha1.ClusterFederatedTrustDomain, conditions map[string]metav1.Condition) error {
	var errs []error
	for _, cftd := range cftds {
		if cftd.DeletionTimestamp != nil || !c.opts.Class.Matches(cftd.Spec.ClassName) {
			continue
		}
		if _, err := c.status.Write(ctx, cftd, nil, conditions[cftd.Name]); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// newStatusWriter returns the writer of ClusterFederatedTrustDomain status. Without a client,
// or in a dry run, it writes nothing.
func newStatusWriter(client spireclientset.Interface, dryRun bool) *runner.StatusWriter[*spirev1alpha1.ClusterFederatedTrustDomain] {
	var update func(context.Context, *spirev1alpha1.ClusterFederatedTrustDomain, metav1.UpdateOptions) (*spirev1alpha1.ClusterFederatedTrustDomain, error)
	if client != nil {
		update = client.SpireV1alpha1().ClusterFederatedTrustDomains().UpdateStatus
	}
	return runner.NewStatusWriter("ClusterFederatedTrustDomain", update, dryRun,
		func(o *spirev1alpha1.ClusterFederatedTrustDomain) *[]metav1.Condition { return &o.Status.Conditions })
}
