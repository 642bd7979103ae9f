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
	"strings"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"k8s.io/klog/v2"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

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
