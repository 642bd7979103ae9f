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
	"testing"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"

	"github.com/spire-registrar/spire-registrar/pkg/render"
)

// TestRefusedWritesFailClosed: when SPIRE refuses an update, the entry it would have
// rewritten is deleted if it grants what nothing declares, and kept if it grants less than
// what is declared. The declared entry is reported as failed either way.
func TestRefusedWritesFailClosed(t *testing.T) {
	federating := func(e *spiretypes.Entry, tds ...string) *spiretypes.Entry { e.FederatesWith = tds; return e }
	admin := func(e *spiretypes.Entry) *spiretypes.Entry { e.Admin = true; return e }
	for _, tc := range []struct {
		name     string
		current  *spiretypes.Entry
		declared *spiretypes.Entry
		// wantPaths are the SPIFFE ID paths SPIRE holds after the sync.
		wantPaths []string
	}{{
		name:     "a replacement refused deletes the old identity",
		current:  podEntry("e1", "p1", "/old"),
		declared: federating(podEntry("", "p1", "/new"), "partner.org"),
	}, {
		name:     "a refused update that would drop admin deletes the entry",
		current:  admin(podEntry("e1", "p1", "/web")),
		declared: federating(podEntry("", "p1", "/web"), "partner.org"),
	}, {
		name:     "a refused update that would drop a DNS name deletes the entry",
		current:  podEntry("e1", "p1", "/web", "old.example.org"),
		declared: federating(podEntry("", "p1", "/web", "new.example.org"), "partner.org"),
	}, {
		name:      "a refused update that only adds keeps the narrower entry",
		current:   podEntry("e1", "p1", "/web", "web.example.org"),
		declared:  federating(podEntry("", "p1", "/web", "web.example.org"), "partner.org"),
		wantPaths: []string{"/web"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, r, server := newTestReconciler(t, Options{})
			server.RequireFederatedBundles(true)
			server.SetEntries(tc.current)
			d := declare(tc.declared, "web", 0, "p1")
			// The controller holds the current entry, as after a resync that declared it.
			r.cache.replace(server.Entries())

			res, err := r.Sync(ctx, PodScope("p1"), []*render.DeclaredEntry{d})
			if err == nil {
				t.Fatal("sync succeeded, want SPIRE's refusal")
			}
			if res.Failures[d.Key] == nil {
				t.Errorf("the declared entry is not reported as failed: %v", res.Failures)
			}
			if diff := cmp.Diff(tc.wantPaths, spiffePaths(server.Entries())); diff != "" {
				t.Errorf("SPIRE's entries (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPaths, spiffePaths(r.cache.forPod("p1"))); diff != "" {
				t.Errorf("cached entries (-want +got):\n%s", diff)
			}
		})
	}
}
