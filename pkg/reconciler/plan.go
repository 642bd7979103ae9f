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
	"iter"
	"strings"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// Plan is what it takes to make the current entries equal to the declared ones.
type Plan struct {
	// ToCreate are declared entries SPIRE lacks.
	ToCreate []*render.DeclaredEntry
	// ToUpdate are current entries to rewrite, keeping their IDs.
	ToUpdate []*EntryUpdate
	// ToDelete are current entries nobody declares, and duplicates of declared ones.
	ToDelete []*spiretypes.Entry
	// InSync are declared entries SPIRE already holds as declared.
	InSync []*render.DeclaredEntry
	// Masked are declared entries that lose to an older declarer of the same entry.
	Masked []*render.DeclaredEntry
}

// Outcomes yields every declared entry of the plan with what became of it, given the write
// failures of the plan: OutcomeSet when SPIRE holds it as declared, OutcomeEntryFailure when
// its write failed, OutcomeMasked when an older declarer of the same entry wins.
func (p Plan) Outcomes(failures map[render.Key]error) iter.Seq2[*render.DeclaredEntry, Outcome] {
	return func(yield func(*render.DeclaredEntry, Outcome) bool) {
		set := func(d *render.DeclaredEntry) bool {
			if failures[d.Key] != nil {
				return yield(d, OutcomeEntryFailure)
			}
			return yield(d, OutcomeSet)
		}
		for _, d := range p.ToCreate {
			if !set(d) {
				return
			}
		}
		for _, u := range p.ToUpdate {
			if !set(u.Desired) {
				return
			}
		}
		for _, d := range p.InSync {
			if !set(d) {
				return
			}
		}
		for _, d := range p.Masked {
			if !yield(d, OutcomeMasked) {
				return
			}
		}
	}
}

// writes counts the writes a plan makes.
func (p *Plan) writes() int {
	return len(p.ToCreate) + len(p.ToUpdate) + len(p.ToDelete)
}

// add appends another plan's changes to p.
func (p *Plan) add(q Plan) {
	p.ToCreate = append(p.ToCreate, q.ToCreate...)
	p.ToUpdate = append(p.ToUpdate, q.ToUpdate...)
	p.ToDelete = append(p.ToDelete, q.ToDelete...)
	p.InSync = append(p.InSync, q.InSync...)
	p.Masked = append(p.Masked, q.Masked...)
}

// EntryUpdate rewrites current with desired's fields; the mask says which.
type EntryUpdate struct {
	Current *spiretypes.Entry
	Desired *render.DeclaredEntry
	Mask    *spiretypes.EntryMask
	// Replaces says that Current is an entry of another key, which nothing declares: the
	// update turns it into Desired to keep its ID. Should SPIRE refuse that, Current is
	// deleted all the same.
	Replaces bool
}

// outcomes returns, per pod, the outcome of every ClusterSPIFFEID that applies to it: a
// render failure, or what became of its entry in the plan (set, failed to write, or masked).
func outcomes(p Plan, failures map[render.Key]error, renderFailures map[types.UID][]string) map[types.UID]PodOutcomes {
	byPod := map[types.UID]PodOutcomes{}
	for uid, names := range renderFailures {
		for _, name := range names {
			if byPod[uid] == nil {
				byPod[uid] = PodOutcomes{}
			}
			byPod[uid][name] = OutcomeRenderFailure
		}
	}
	for d, o := range p.Outcomes(failures) {
		if d.Declarer.Kind != render.KindClusterSPIFFEID {
			continue
		}
		if byPod[d.Declarer.PodUID] == nil {
			byPod[d.Declarer.PodUID] = PodOutcomes{}
		}
		byPod[d.Declarer.PodUID][d.Declarer.Name] = o
	}
	return byPod
}

// logPlan logs every change of a plan with the entry and the reason. In a dry run that is the
// product, logged at the default level; otherwise it is detail for V(3).
func logPlan(ctx context.Context, p Plan, dryRun bool) {
	logger := klog.FromContext(ctx)
	verb := func(v string) string { return v }
	if dryRun {
		verb = func(v string) string { return "Dry run: would " + strings.ToLower(v) }
	} else {
		logger = logger.V(3)
	}
	if !logger.Enabled() {
		return
	}
	for _, d := range p.ToCreate {
		logger.Info(verb("Create entry"), "entry", describe(d.Entry),
			"reason", "declared by "+d.Declarer.Kind+" "+d.Declarer.Name+" and missing from SPIRE")
	}
	for _, u := range p.ToUpdate {
		logger.Info(verb("Update entry"), "id", u.Current.GetId(), "entry", describe(u.Desired.Entry),
			"reason", "declared by "+u.Desired.Declarer.Kind+" "+u.Desired.Declarer.Name+"; out of date: "+strings.Join(maskFields(u.Mask), ","))
	}
	for _, e := range p.ToDelete {
		logger.Info(verb("Delete entry"), "id", e.GetId(), "entry", describe(e),
			"reason", "declared by no resource, or a duplicate of a declared entry")
	}
	for _, d := range p.Masked {
		logger.V(2).Info("Entry masked", "entry", describe(d.Entry), "declarer", d.Declarer.Kind+" "+d.Declarer.Name,
			"reason", "an older resource declares the same entry")
	}
}

// describe renders an entry's identity for a log line.
func describe(e *spiretypes.Entry) string {
	selectors := make([]string, 0, len(e.GetSelectors()))
	for _, s := range e.GetSelectors() {
		selectors = append(selectors, s.GetType()+":"+s.GetValue())
	}
	return render.SPIFFEIDString(e.GetSpiffeId()) + " parent=" + render.SPIFFEIDString(e.GetParentId()) + " selectors=" + strings.Join(selectors, ",")
}
