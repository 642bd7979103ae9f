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

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	"github.com/spire-registrar/spire-registrar/pkg/spire"
)

// listing is what a resync keeps of SPIRE's full list: the entries it owns, compacted into a
// new index page by page as they arrive, and the leftovers of a former owner, which it
// deletes. The decoded list is never held whole: at 300k entries it would take about 200 MB
// next to the index, and the compaction overlaps with waiting for the next page.
type listing struct {
	index     entryIndex
	interner  *interner
	leftovers []*spiretypes.Entry
	// listed counts every entry SPIRE returned, owned counts those the index holds.
	listed, owned int
}

// list lists every entry of SPIRE into a listing. sizeHint is about how many entries the
// index will hold. On an error it returns no listing: a partial one must not turn into
// deletes.
func (r *Reconciler) list(ctx context.Context, sizeHint int) (*listing, error) {
	l := &listing{index: newEntryIndex(sizeHint), interner: newInterner()}
	err := spire.ListEntryPages(ctx, r.client, func(page []*spiretypes.Entry) error {
		l.listed += len(page)
		for _, e := range page {
			switch {
			case r.ownership.owns(e):
				// A server listing an entry twice (pages under concurrent writes) must not
				// index it twice.
				l.index.remove(e.GetId())
				l.index.put(compactEntry(e, l.interner))
			case r.ownership.deleteOnly(e):
				l.leftovers = append(l.leftovers, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.owned = len(l.index.byID)
	return l, nil
}
