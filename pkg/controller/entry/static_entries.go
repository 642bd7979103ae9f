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

package entry

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/spire-registrar/spire-registrar/pkg/metrics"
	"github.com/spire-registrar/spire-registrar/pkg/reconciler"
	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// declaredClusterStaticEntries renders every ClusterStaticEntry of this controller's class.
// Invalid ones are returned with their error and declare nothing.
func (c *Controller) declaredClusterStaticEntries() ([]*render.DeclaredEntry, map[string]error, error) {
	if c.opts.IgnoreClusterStaticEntries {
		return nil, nil, nil
	}
	all, err := c.clusterStaticEntryLister.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing ClusterStaticEntries: %w", err)
	}
	var declared []*render.DeclaredEntry
	invalid := map[string]error{}
	for _, cse := range all {
		// Those being deleted take part until they are gone, as in spire-controller-manager.
		if !c.opts.ClassMatches(cse.Spec.ClassName) {
			continue
		}
		d, err := c.renderer.StaticEntry(cse)
		if err != nil {
			invalid[cse.Name] = err
			metrics.RenderFailures.WithLabelValues(render.KindClusterStaticEntry).Inc()
			continue
		}
		declared = append(declared, d)
	}
	return declared, invalid, nil
}

// syncClusterStaticEntry makes SPIRE hold what a ClusterStaticEntry declares. Its scope is the
// entry key it declares now and every key of no pod that SPIRE holds an entry of but nothing
// declares: what this or another resource declared before an edit or a delete. That scope is
// derived from the entry cache, which moves only with writes SPIRE took, so a retry after a
// failed write still sees the old key. Every static entry of those keys takes part, so the
// oldest declarer wins and the rest are masked, as in a full resync.
func (c *Controller) syncClusterStaticEntry(ctx context.Context, name string) error {
	// The cache is read before the lister: an entry is cached only after a sync saw its
	// resource in the lister, so no entry of a resource the lister holds is taken for left
	// over. The queue's single worker keeps two of these syncs from interleaving.
	held := c.reconciler.KeysOfNoPod()
	declared, invalid, err := c.declaredClusterStaticEntries()
	if err != nil {
		return err
	}
	declaredKeys := sets.New[render.Key]()
	var key render.Key
	for _, d := range declared {
		declaredKeys.Insert(d.Key)
		if d.Declarer.Name == name {
			key = d.Key
		}
	}
	var scope []render.Key
	if key != "" {
		scope = append(scope, key)
	}
	for _, k := range held {
		if !declaredKeys.Has(k) {
			scope = append(scope, k)
		}
	}

	var errs []error
	if len(scope) > 0 {
		res, err := c.reconciler.Sync(ctx, reconciler.KeyScope(scope...), declared)
		if err != nil {
			errs = append(errs, err)
		}
		for statusName, outcome := range clusterStaticEntryOutcomes(res) {
			if err := c.updateClusterStaticEntryStatus(ctx, statusName, outcome); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err, ok := invalid[name]; ok {
		if err := c.updateClusterStaticEntryStatus(ctx, name, clusterStaticEntryOutcome{err: err}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("syncing ClusterStaticEntry %s: %w", name, errors.Join(errs...))
	}
	return nil
}

// clusterStaticEntryOutcome is what became of one ClusterStaticEntry: whether it rendered,
// lost to an older twin, or is in SPIRE; err says why it did not render or could not be
// written.
type clusterStaticEntryOutcome struct {
	rendered, masked, set bool
	err                   error
}

// clusterStaticEntryOutcomes computes the outcome of every ClusterStaticEntry that takes part
// in a sync.
func clusterStaticEntryOutcomes(res reconciler.Result) map[string]clusterStaticEntryOutcome {
	out := map[string]clusterStaticEntryOutcome{}
	for d, o := range res.Plan.Outcomes(res.Failures) {
		if d.Declarer.Kind != render.KindClusterStaticEntry {
			continue
		}
		co := clusterStaticEntryOutcome{rendered: true, masked: o == reconciler.OutcomeMasked, set: o == reconciler.OutcomeSet}
		if o == reconciler.OutcomeEntryFailure {
			co.err = res.Failures[d.Key]
		}
		out[d.Declarer.Name] = co
	}
	return out
}
