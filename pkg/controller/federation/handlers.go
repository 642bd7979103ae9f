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
	"k8s.io/client-go/tools/cache"

	spireinformers "github.com/spire-registrar/spire-registrar/generated/informers/externalversions/spire/v1alpha1"
	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/controller/runner"
	fedreconciler "github.com/spire-registrar/spire-registrar/pkg/reconciler/federation"
)

// addEventHandlers maps every event to the trust domains it affects. Handlers run on the
// informer's goroutine, so they only compute keys and enqueue.
func (c *Controller) addEventHandlers(cftdInformer spireinformers.ClusterFederatedTrustDomainInformer) error {
	return c.handlers.Add(cftdInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.onUpdate,
		DeleteFunc: c.onDelete,
	})
}

// indexByTrustDomain indexes resources by the key of the trust domain they name.
func indexByTrustDomain(obj any) ([]string, error) {
	cftd, ok := obj.(*spirev1alpha1.ClusterFederatedTrustDomain)
	if !ok {
		return nil, nil
	}
	return []string{fedreconciler.KeyOf(cftd.Spec.TrustDomain)}, nil
}

func (c *Controller) enqueue(obj any) {
	if cftd, ok := runner.Unwrap[*spirev1alpha1.ClusterFederatedTrustDomain](obj); ok {
		c.queue.Add(fedreconciler.KeyOf(cftd.Spec.TrustDomain))
	}
}

// onUpdate enqueues the trust domain a resource names, and the one it named before when that
// changed, so the old relationship is deleted or handed to the next-oldest resource. Syncing a
// key costs no SPIRE call when nothing differs, so no finer filter is needed.
func (c *Controller) onUpdate(oldObj, newObj any) {
	oldCFTD, okOld := oldObj.(*spirev1alpha1.ClusterFederatedTrustDomain)
	newCFTD, okNew := newObj.(*spirev1alpha1.ClusterFederatedTrustDomain)
	if !okOld || !okNew || oldCFTD.ResourceVersion == newCFTD.ResourceVersion {
		return
	}
	oldKey, newKey := fedreconciler.KeyOf(oldCFTD.Spec.TrustDomain), fedreconciler.KeyOf(newCFTD.Spec.TrustDomain)
	c.reconciler.ReleaseOnChange(oldCFTD, newCFTD)
	c.queue.Add(newKey)
	if oldKey != newKey {
		c.queue.Add(oldKey)
	}
}

func (c *Controller) onDelete(obj any) {
	if cftd, ok := runner.Unwrap[*spirev1alpha1.ClusterFederatedTrustDomain](obj); ok {
		c.reconciler.ReleaseOnDelete(cftd)
		c.queue.Add(fedreconciler.KeyOf(cftd.Spec.TrustDomain))
	}
}
