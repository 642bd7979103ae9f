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

package reconciler

import (
	"context"
	"fmt"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/render"
	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// finalize is the only function that writes to SPIRE. It applies a plan — creates and updates
// before deletes, so a pod whose entry changes is never left without one — and keeps the entry
// cache equal to what SPIRE answered. It fails closed: an update that fails leaves behind an
// entry that grants what nothing declares (the entry of another identity it was to replace,
// or an admin, downstream, federatesWith or DNS name no longer declared), and that entry is
// deleted with the rest. It returns the write failures by entry key; the error aggregates
// every failure so the key is retried.
func (r *Reconciler) finalize(ctx context.Context, p Plan) (map[render.Key]error, error) {
	logPlan(ctx, p, r.dryRun)
	w := &planWriter{cache: r.cache, client: r.client, ownership: r.ownership, support: r.fieldSupport,
		logger: klog.FromContext(ctx), failures: map[render.Key]error{}}
	w.create(ctx, p.ToCreate)
	w.update(ctx, p.ToUpdate)
	w.delete(ctx, append(p.ToDelete, w.revoke...))
	if p.writes() > 0 {
		klog.FromContext(ctx).V(2).Info("Applied entry plan",
			"created", len(p.ToCreate), "updated", len(p.ToUpdate), "deleted", len(p.ToDelete), "errors", len(w.errs))
	}
	return w.failures, utilerrors.NewAggregate(w.errs)
}

// planWriter collects the results of one plan's writes.
type planWriter struct {
	cache     *entryCache
	client    spire.EntryClient
	ownership ownership
	support   *fieldSupport
	logger    klog.Logger
	failures  map[render.Key]error
	errs      []error
	// revoke are the current entries of failed updates that grant more than is declared.
	revoke []*spiretypes.Entry
}

func (w *planWriter) fail(key render.Key, err error) {
	if key != "" {
		w.failures[key] = err
	}
	w.errs = append(w.errs, err)
}

func (w *planWriter) create(ctx context.Context, ds []*render.DeclaredEntry) {
	if len(ds) == 0 {
		return
	}
	entries := make([]*spiretypes.Entry, len(ds))
	for i, d := range ds {
		entries[i] = d.Entry
		if id := w.ownership.newID(); id != "" {
			entries[i] = cloneEntry(d.Entry)
			entries[i].Id = id
		}
	}
	results, err := w.client.CreateEntries(ctx, entries)
	results = spire.CompleteEntryResults(results, len(entries), err)
	for i, d := range ds {
		r := results[i]
		switch {
		case r.Err == nil:
			w.support.learn(w.logger, entries[i], r.Entry)
			w.cache.put(r.Entry)
		case spire.IsAlreadyExists(r.Err) && r.Entry != nil && !w.ownership.owns(r.Entry):
			// Another owner (another prefix, or an operator) holds the same entry; SPIRE allows
			// one, so this declaration cannot be written. It is reported, never taken over.
			w.fail(d.Key, fmt.Errorf("creating entry %s: SPIRE already holds it as %s, which this controller does not own",
				render.SPIFFEIDString(d.Entry.GetSpiffeId()), r.Entry.GetId()))
		case spire.IsAlreadyExists(r.Err) && r.Entry != nil:
			// SPIRE holds this entry but the cache did not: adopt it, and sync the key again
			// so that its fields are compared with what is declared.
			w.cache.put(r.Entry)
			w.errs = append(w.errs, fmt.Errorf("entry %s already existed as %s; syncing again", render.SPIFFEIDString(d.Entry.GetSpiffeId()), r.Entry.GetId()))
		default:
			w.fail(d.Key, fmt.Errorf("creating entry %s: %w", render.SPIFFEIDString(d.Entry.GetSpiffeId()), r.Err))
		}
	}
}

// update sends one batch per distinct mask, since SPIRE takes a single mask per batch.
func (w *planWriter) update(ctx context.Context, us []*EntryUpdate) {
	byMask := map[uint64][]*EntryUpdate{}
	var order []uint64
	for _, u := range us {
		k := maskKey(u.Mask)
		if _, ok := byMask[k]; !ok {
			order = append(order, k)
		}
		byMask[k] = append(byMask[k], u)
	}
	for _, k := range order {
		group := byMask[k]
		entries := make([]*spiretypes.Entry, len(group))
		for i, u := range group {
			e := cloneEntry(u.Desired.Entry)
			e.Id = u.Current.GetId()
			entries[i] = e
		}
		results, err := w.client.UpdateEntries(ctx, entries, group[0].Mask)
		results = spire.CompleteEntryResults(results, len(entries), err)
		for i, u := range group {
			r := results[i]
			switch {
			case r.Err == nil:
				w.support.learn(w.logger, entries[i], r.Entry)
				w.cache.put(r.Entry)
			case spire.IsNotFound(r.Err):
				// Deleted behind our back: forget it, and the retry creates it anew.
				w.cache.remove(u.Current.GetId())
				w.fail(u.Desired.Key, fmt.Errorf("updating entry %s: it no longer exists; syncing again", u.Current.GetId()))
			default:
				w.failUpdate(u, fmt.Errorf("updating entry %s: %w", u.Current.GetId(), r.Err))
			}
		}
	}
}

// failUpdate records a failed update, and revokes the entry it left if that grants more than
// is declared. The declared entry is then reported as failed, as a refused create is.
func (w *planWriter) failUpdate(u *EntryUpdate, err error) {
	w.fail(u.Desired.Key, err)
	if u.Replaces || grantsBeyond(u.Current, u.Desired.Entry) {
		w.logger.Info("Deleting an entry whose update failed: it grants what is no longer declared",
			"entryID", u.Current.GetId(), "spiffeID", render.SPIFFEIDString(u.Current.GetSpiffeId()),
			"declared", render.SPIFFEIDString(u.Desired.Entry.GetSpiffeId()), "err", err)
		w.revoke = append(w.revoke, u.Current)
	}
}

func (w *planWriter) delete(ctx context.Context, entries []*spiretypes.Entry) {
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if w.ownership.keeps(e) {
			w.logger.V(4).Info("Keeping the entry of spire-registrar's own identity", "entryID", e.GetId())
			continue
		}
		ids = append(ids, e.GetId())
	}
	if len(ids) == 0 {
		return
	}
	results, err := w.client.DeleteEntries(ctx, ids)
	results = spire.CompleteDeleteResults(results, ids, err)
	for i, id := range ids {
		if r := results[i]; r.Err != nil && !spire.IsNotFound(r.Err) {
			w.fail("", fmt.Errorf("deleting entry %s: %w", id, r.Err))
			continue
		}
		w.cache.remove(id)
	}
}
