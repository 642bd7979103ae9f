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

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// finalize is the only function that writes to SPIRE. It applies a plan and keeps the cache
// equal to what SPIRE answered. A create or update that fails in a way that means the cache
// was stale (SPIRE v1.13 reports both "already exists" on create and "not found" on update as
// INTERNAL) refreshes the affected trust domains from a fresh list, so that the retry the
// returned error causes creates or updates as SPIRE's state requires. It returns the
// relationships it wrote, for the caller to report.
func (r *Reconciler) finalize(ctx context.Context, p plan) ([]Written, error) {
	for _, d := range p.toAdopt {
		r.sentBundles.set(d.trustDomain, d.relationship.GetTrustDomainBundle())
	}
	w := &planWriter{r: r}
	w.create(ctx, p.toCreate)
	w.update(ctx, p.toUpdate)
	w.delete(ctx, append(p.toDelete, w.revoke...))
	if len(w.stale) > 0 {
		if err := r.refresh(ctx, w.stale); err != nil {
			w.errs = append(w.errs, err)
		}
	}
	if r.opts.DryRun {
		logPlan(klog.FromContext(ctx), p)
	}
	if n := len(p.toCreate) + len(p.toUpdate) + len(p.toDelete); n > 0 {
		klog.FromContext(ctx).V(2).Info("Applied federation relationship plan",
			"created", len(p.toCreate), "updated", len(p.toUpdate), "deleted", len(p.toDelete), "errors", len(w.errs))
	}
	return w.written, utilerrors.NewAggregate(w.errs)
}

// planWriter collects the results of one plan's writes.
type planWriter struct {
	r       *Reconciler
	errs    []error
	written []Written
	stale   []string
	// revoke are the trust domains whose update failed while SPIRE fetches their bundle from
	// an endpoint nothing declares any more: they are deleted, and the retry creates them.
	revoke []string
}

// failUpdate records a failed update and fails closed: a relationship left with an endpoint
// or profile no resource declares is revoked. One whose bundle alone was outdated is kept,
// since SPIRE refreshes that bundle from the declared endpoint anyway.
func (w *planWriter) failUpdate(u *relationshipUpdate, err error) {
	w.errs = append(w.errs, fmt.Errorf("updating federation relationship %q: %w", u.trustDomain, err))
	if u.movesEndpoint() {
		w.revoke = append(w.revoke, u.trustDomain)
	}
}

func (w *planWriter) create(ctx context.Context, ds []*declaration) {
	if len(ds) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	rels := make([]*spiretypes.FederationRelationship, len(ds))
	for i, d := range ds {
		rels[i] = d.relationship
	}
	results, err := w.r.spire.CreateFederationRelationships(ctx, rels)
	results = spire.CompleteFederationResults(results, len(rels), err)
	for i, d := range ds {
		res := results[i]
		if res.Err != nil {
			if staleCode(res.Err) {
				w.stale = append(w.stale, d.trustDomain)
			}
			w.errs = append(w.errs, fmt.Errorf("creating federation relationship %q: %w", d.trustDomain, res.Err))
			continue
		}
		w.r.relationships.put(echoed(res.Relationship, d.relationship))
		w.r.sentBundles.set(d.trustDomain, d.relationship.GetTrustDomainBundle())
		logger.V(2).Info("Created federation relationship", "trustDomain", d.trustDomain, "clusterFederatedTrustDomain", klog.KObj(d.owner))
		w.written = append(w.written, Written{Owner: d.owner, TrustDomain: d.trustDomain})
	}
}

// update sends at most two batches, one per mask: with and without the bundle.
func (w *planWriter) update(ctx context.Context, us []*relationshipUpdate) {
	var withBundle, withoutBundle []*relationshipUpdate
	for _, u := range us {
		if u.sendsBundle() {
			withBundle = append(withBundle, u)
		} else {
			withoutBundle = append(withoutBundle, u)
		}
	}
	if len(withBundle) > 0 {
		w.updateGroup(ctx, withBundle, true)
	}
	if len(withoutBundle) > 0 {
		w.updateGroup(ctx, withoutBundle, false)
	}
}

func (w *planWriter) updateGroup(ctx context.Context, group []*relationshipUpdate, sendBundle bool) {
	logger := klog.FromContext(ctx)
	rels := make([]*spiretypes.FederationRelationship, len(group))
	for i, u := range group {
		rels[i] = u.relationship
		if !sendBundle && u.relationship.GetTrustDomainBundle() != nil {
			// The mask already keeps SPIRE's bundle; not sending the old copy at all also
			// keeps it out of SPIRE's validation and of anything that ignores the mask.
			rels[i] = proto.CloneOf(u.relationship)
			rels[i].TrustDomainBundle = nil
		}
	}
	results, err := w.r.spire.UpdateFederationRelationships(ctx, rels, updateMask(sendBundle))
	results = spire.CompleteFederationResults(results, len(rels), err)
	for i, u := range group {
		res := results[i]
		if res.Err != nil {
			if staleCode(res.Err) {
				w.stale = append(w.stale, u.trustDomain)
			}
			w.failUpdate(u, res.Err)
			continue
		}
		w.r.relationships.put(echoed(res.Relationship, rels[i]))
		if sendBundle {
			w.r.sentBundles.set(u.trustDomain, u.relationship.GetTrustDomainBundle())
		}
		logger.V(2).Info("Updated federation relationship", "trustDomain", u.trustDomain, "fields", u.outdated, "clusterFederatedTrustDomain", klog.KObj(u.owner))
		w.written = append(w.written, Written{Owner: u.owner, TrustDomain: u.trustDomain, Updated: u.outdated})
	}
}

func (w *planWriter) delete(ctx context.Context, trustDomains []string) {
	if len(trustDomains) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	results, err := w.r.spire.DeleteFederationRelationships(ctx, trustDomains)
	results = spire.CompleteDeleteResults(results, trustDomains, err)
	for i, td := range trustDomains {
		// NOT_FOUND means someone else deleted it first: the goal is reached.
		if res := results[i]; res.Err != nil && !spire.IsNotFound(res.Err) {
			w.errs = append(w.errs, fmt.Errorf("deleting federation relationship %q: %w", td, res.Err))
			continue
		}
		w.r.relationships.remove(td)
		w.r.sentBundles.forget(td)
		logger.V(2).Info("Deleted federation relationship no resource declares", "trustDomain", td)
	}
}

// staleCode reports whether a failed create or update may mean that the cache disagrees with
// SPIRE about whether the relationship exists. SPIRE v1.13 returns INTERNAL for both cases
// (its service maps every datastore error to INTERNAL); ALREADY_EXISTS and NOT_FOUND are what
// the API documents, so they are honoured too.
func staleCode(err error) bool {
	switch status.Code(err) {
	case codes.Internal, codes.AlreadyExists, codes.NotFound:
		return true
	}
	return false
}

// echoed is the relationship SPIRE returned, or what was sent if it returned none.
func echoed(got, sent *spiretypes.FederationRelationship) *spiretypes.FederationRelationship {
	if got != nil && got.GetTrustDomain() != "" {
		return got
	}
	return sent
}

// refresh lists SPIRE's relationships and updates the cache for the given trust domains only:
// other keys may be written concurrently by other workers, and a list taken before their
// write completed must not overwrite what they cached.
func (r *Reconciler) refresh(ctx context.Context, trustDomains []string) error {
	rels, err := r.spire.ListFederationRelationships(ctx)
	if err != nil {
		return fmt.Errorf("refreshing federation relationships %v: %w", trustDomains, err)
	}
	byTD := make(map[string]*spiretypes.FederationRelationship, len(rels))
	for _, rel := range rels {
		byTD[rel.GetTrustDomain()] = rel
	}
	for _, td := range trustDomains {
		if rel := byTD[td]; rel != nil {
			r.relationships.put(rel)
		} else {
			r.relationships.remove(td)
		}
	}
	klog.FromContext(ctx).V(2).Info("Refreshed federation relationships after a write SPIRE refused", "trustDomains", trustDomains)
	return nil
}

// logPlan shows a dry run's user what the plan would write, at the default level.
func logPlan(logger klog.Logger, p plan) {
	for _, d := range p.toCreate {
		logger.Info("Dry run: would create federation relationship", "trustDomain", d.trustDomain, "clusterFederatedTrustDomain", klog.KObj(d.owner))
	}
	for _, u := range p.toUpdate {
		logger.Info("Dry run: would update federation relationship", "trustDomain", u.trustDomain, "fields", u.outdated, "clusterFederatedTrustDomain", klog.KObj(u.owner))
	}
	for _, td := range p.toDelete {
		logger.Info("Dry run: would delete federation relationship", "trustDomain", td)
	}
}
