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

// Package federation is the SPIRE side of the federation controller, as k8s.io/endpointslice
// is the write side of the EndpointSlice controller: it turns ClusterFederatedTrustDomains
// into declared relationships (conflicts resolved), diffs them against its cache of SPIRE's
// relationships in a pure plan, and applies the plan in finalize, the only function that
// writes to SPIRE. It reads nothing from Kubernetes: the controller passes the resources in.
package federation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/klog/v2"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
	"github.com/spire-registrar/spire-registrar/pkg/config"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// Options are the settings the reconciler declares and writes relationships with.
type Options struct {
	// TrustDomain is the SPIRE server's own trust domain, which cannot federate with itself.
	TrustDomain spiffeid.TrustDomain
	// Class selects the resources that declare relationships.
	Class config.Class
	// SharedServer says other owners keep relationships on the SPIRE server too: then only
	// relationships this reconciler's resources gave up are deleted (see ownership.go),
	// instead of every relationship no resource declares.
	SharedServer bool
	// DryRun logs the plan at the default level. The SPIRE client is expected to be
	// spire.DryRun, which writes nothing.
	DryRun bool
}

// Reconciler keeps SPIRE's federation relationships equal to what ClusterFederatedTrustDomains
// declare. SPIRE holds at most one relationship per trust domain, so the trust domain's name
// is the unit of work. Its methods are safe for concurrent use.
type Reconciler struct {
	opts  Options
	spire spire.FederationClient

	relationships *relationshipCache
	// sentBundles keeps the resources' bootstrap bundles from overwriting the bundles SPIRE
	// refreshed (see sent_bundles.go).
	sentBundles *sentBundles
	// released are trust domains this reconciler's resources gave up; on a shared server
	// only those are deleted.
	released releasedTrustDomains

	// resyncLock lets syncs of single trust domains run concurrently (read) but never
	// alongside a full resync (write), which replaces the cache under them.
	resyncLock sync.RWMutex
}

// NewReconciler returns a reconciler that writes to client. Its cache is empty until the
// first Resync.
func NewReconciler(client spire.FederationClient, opts Options) (*Reconciler, error) {
	if client == nil {
		return nil, errors.New("spire client is nil")
	}
	if opts.TrustDomain.IsZero() {
		return nil, errors.New("trust domain is required")
	}
	return &Reconciler{
		opts:          opts,
		spire:         client,
		relationships: newRelationshipCache(),
		sentBundles:   newSentBundles(),
	}, nil
}

// Problem is something wrong with a resource, to be reported on it.
type Problem struct {
	Object *spirev1alpha1.ClusterFederatedTrustDomain
	// Reason is one of the Reason constants of ClusterFederatedTrustDomain in pkg/apis.
	Reason  string
	Message string
}

// Result is what a Sync or a Resync did.
type Result struct {
	// Problems are what is wrong with resources, sorted by resource name.
	Problems []Problem
	// TrustDomains are those the plan wrote or tried to write.
	TrustDomains []string
	// Written are the relationships SPIRE created or updated.
	Written []Written
}

// Written is a relationship SPIRE created or updated, to be reported on the resource that
// declares it.
type Written struct {
	Owner       *spirev1alpha1.ClusterFederatedTrustDomain
	TrustDomain string
	// Updated are the fields an update changed; nil for a create.
	Updated []string
}

// ResyncResult is what a full resync did.
type ResyncResult struct {
	Result
	// WriteErr aggregates the writes SPIRE refused; their trust domains are worth retrying.
	// They do not fail the resync: the picture it acted on was complete.
	WriteErr error
}

// Sync makes SPIRE's relationship with one trust domain equal to what the resources naming it
// declare, from the cache: it costs no SPIRE call when nothing differs. cftds are the
// resources in view that name the trust domain, of every class. The error aggregates the
// writes SPIRE refused, so the caller retries the trust domain.
func (r *Reconciler) Sync(ctx context.Context, trustDomain string, cftds []*spirev1alpha1.ClusterFederatedTrustDomain) (Result, error) {
	r.resyncLock.RLock()
	defer r.resyncLock.RUnlock()

	decls, problems := declarations(cftds, r.opts.TrustDomain, r.opts.Class.Matches)
	current := map[string]*spiretypes.FederationRelationship{}
	if rel := r.relationships.get(trustDomain); rel != nil {
		current[trustDomain] = rel
	}
	p := reconcile(decls, r.managed(current, decls, cftds), r.sentBundles.get)
	written, writeErr := r.finalize(ctx, p)
	if writeErr == nil {
		r.released.forget(trustDomain)
	}
	return Result{Problems: problems, TrustDomains: p.trustDomains(), Written: written}, writeErr
}

// Resync diffs what every resource in view declares against a fresh list of every
// relationship SPIRE holds, and deletes the relationships no resource declares (on a shared
// server, those its resources gave up). It returns an error, and writes nothing, when SPIRE
// cannot be listed: a partial picture must never turn into deletes.
func (r *Reconciler) Resync(ctx context.Context, cftds []*spirev1alpha1.ClusterFederatedTrustDomain) (ResyncResult, error) {
	r.resyncLock.Lock()
	defer r.resyncLock.Unlock()
	start := time.Now()

	rels, err := r.spire.ListFederationRelationships(ctx)
	if err != nil {
		return ResyncResult{}, fmt.Errorf("listing SPIRE federation relationships: %w", err)
	}
	r.relationships.replace(rels)

	decls, problems := declarations(cftds, r.opts.TrustDomain, r.opts.Class.Matches)
	p := reconcile(decls, r.managed(r.relationships.all(), decls, cftds), r.sentBundles.get)
	written, writeErr := r.finalize(ctx, p)
	if writeErr == nil {
		r.released.forget(p.toDelete...)
	}
	klog.FromContext(ctx).V(2).Info("Full resync done", "duration", time.Since(start), "relationships", len(rels),
		"declared", len(decls), "created", len(p.toCreate), "updated", len(p.toUpdate), "deleted", len(p.toDelete),
		"adopted", len(p.toAdopt), "inSync", p.inSync, "invalid", p.invalid, "problems", len(problems))
	return ResyncResult{Result: Result{Problems: problems, TrustDomains: p.trustDomains(), Written: written}, WriteErr: writeErr}, nil
}
