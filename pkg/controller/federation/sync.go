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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
)

// syncTrustDomain makes SPIRE's relationship with one trust domain equal to what the oldest
// resource naming it declares: created when missing, updated when it differs, deleted when no
// resource names the trust domain, and left alone when the declaring spec is invalid. Then
// it reports problems and sets the resources' status.
func (c *Controller) syncTrustDomain(ctx context.Context, trustDomain string) error {
	objs, err := c.cftdIndexer.ByIndex(trustDomainIndex, trustDomain)
	if err != nil {
		return fmt.Errorf("looking up ClusterFederatedTrustDomains of %q: %w", trustDomain, err)
	}
	cftds := make([]*spirev1alpha1.ClusterFederatedTrustDomain, 0, len(objs))
	for _, obj := range objs {
		if cftd, ok := obj.(*spirev1alpha1.ClusterFederatedTrustDomain); ok {
			cftds = append(cftds, cftd)
		}
	}

	res, writeErr := c.reconciler.Sync(ctx, trustDomain, cftds)
	c.report(ctx, res)
	if statusErr := c.writeStatus(ctx, cftds, readyConditions(cftds, res.Problems, writeErr)); statusErr != nil && writeErr == nil {
		return statusErr
	}
	return writeErr
}

// report records an Event on each resource whose relationship SPIRE created or updated, and
// tells each resource's owner what is wrong with it. Events about one object are rate limited
// and aggregated by client-go, so a resource reported at every sync does not flood the API.
func (c *Controller) report(ctx context.Context, res fedreconciler.Result) {
	for _, w := range res.Written {
		if w.Updated == nil {
			c.events.Recorder.Eventf(w.Owner, corev1.EventTypeNormal, spirev1alpha1.ReasonRelationshipCreated, "Created federation relationship with %q", w.TrustDomain)
		} else {
			c.events.Recorder.Eventf(w.Owner, corev1.EventTypeNormal, spirev1alpha1.ReasonRelationshipUpdated, "Updated federation relationship with %q: %v", w.TrustDomain, w.Updated)
		}
	}
	logger := klog.FromContext(ctx)
	for _, p := range res.Problems {
		logger.Info("Ignoring ClusterFederatedTrustDomain", "clusterFederatedTrustDomain", klog.KObj(p.Object), "reason", p.Reason, "message", p.Message)
		c.events.Recorder.Event(p.Object, corev1.EventTypeWarning, p.Reason, runner.Truncate(p.Message, 1024))
	}
}
