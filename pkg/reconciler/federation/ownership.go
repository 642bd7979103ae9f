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
	"sync"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// SPIRE's federation relationships carry no owner, unlike entries, whose IDs can carry a
// prefix. A controller that has the server to itself owns every relationship, as
// spire-controller-manager does: one no resource declares is deleted. A controller that
// shares the server (Options.SharedServer) cannot tell its relationships from another
// owner's by looking at them, so it deletes only what it saw go: a relationship whose
// resource of its class was deleted, renamed to another trust domain or moved to another
// class, and that no resource in view, of any class, still declares. The cost is that a
// resource deleted while no controller of its class runs leaves its relationship in SPIRE,
// to be deleted by hand (spire-server federation delete).

// releasedTrustDomains are the trust domains resources of this reconciler's class stopped
// declaring since they were last synced.
type releasedTrustDomains struct {
	mu  sync.Mutex
	tds map[string]bool
}

func (r *releasedTrustDomains) add(td string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tds == nil {
		r.tds = map[string]bool{}
	}
	r.tds[td] = true
}

func (r *releasedTrustDomains) has(td string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tds[td]
}

func (r *releasedTrustDomains) forget(tds ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, td := range tds {
		delete(r.tds, td)
	}
}

// ReleaseOnChange records the trust domain a resource of this reconciler's class gives up by
// an update: by naming another trust domain, or by moving to another class. The controller
// calls it from its update handler, the only place the old spec is known.
func (r *Reconciler) ReleaseOnChange(oldCFTD, newCFTD *spirev1alpha1.ClusterFederatedTrustDomain) {
	if !r.opts.Class.Matches(oldCFTD.Spec.ClassName) {
		return
	}
	if KeyOf(oldCFTD.Spec.TrustDomain) != KeyOf(newCFTD.Spec.TrustDomain) || !r.opts.Class.Matches(newCFTD.Spec.ClassName) {
		r.released.add(KeyOf(oldCFTD.Spec.TrustDomain))
	}
}

// ReleaseOnDelete records the trust domain a deleted resource of this reconciler's class named.
func (r *Reconciler) ReleaseOnDelete(cftd *spirev1alpha1.ClusterFederatedTrustDomain) {
	if r.opts.Class.Matches(cftd.Spec.ClassName) {
		r.released.add(KeyOf(cftd.Spec.TrustDomain))
	}
}

// managed returns the relationships of current the controller may write: all of them on a
// server of its own; on a shared server, those it declares, and those it released and no
// resource of another class declares. cftds are the resources in view, of every class.
func (r *Reconciler) managed(current map[string]*spiretypes.FederationRelationship, decls map[string]*declaration,
	cftds []*spirev1alpha1.ClusterFederatedTrustDomain) map[string]*spiretypes.FederationRelationship {
	if !r.opts.SharedServer {
		return current
	}
	declaredByOthers := map[string]bool{}
	for _, cftd := range cftds {
		if !r.opts.Class.Matches(cftd.Spec.ClassName) {
			declaredByOthers[KeyOf(cftd.Spec.TrustDomain)] = true
		}
	}
	out := make(map[string]*spiretypes.FederationRelationship, len(decls))
	for td, rel := range current {
		if decls[td] != nil || (r.released.has(td) && !declaredByOthers[td]) {
			out[td] = rel
		}
	}
	return out
}
