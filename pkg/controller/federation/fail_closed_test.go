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
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/spire-registrar/spire-registrar/pkg/spire/spiretest"
)

// TestRefusedEndpointUpdateDeletesTheRelationship: when SPIRE refuses to move a relationship to
// its declared bundle endpoint, the relationship is deleted rather than left fetching the
// trust domain's bundle from an endpoint nothing declares; the retry creates it as declared.
func TestRefusedEndpointUpdateDeletesTheRelationship(t *testing.T) {
	obj := cftd("fed", time.Hour, webSpec("fed.org", "https://fed.org/old"))
	env := newTestEnv(t, obj)
	env.fullResync()
	obj = obj.DeepCopy()
	obj.Spec.BundleEndpointURL = "https://fed.org/new"
	env.set(obj)

	env.spire.FailNext(spiretest.MethodBatchUpdateFederationRelationship, 1, codes.InvalidArgument)
	if err := env.c.syncTrustDomain(env.ctx, "fed.org"); err == nil {
		t.Fatal("sync succeeded; want SPIRE's refusal")
	}
	if tds := env.trustDomains(); len(tds) != 0 {
		t.Fatalf("SPIRE still holds %v with the endpoint nothing declares (%q)", tds, env.rel("fed.org").GetBundleEndpointUrl())
	}
	env.sync("fed.org")
	if got := env.rel("fed.org").GetBundleEndpointUrl(); got != "https://fed.org/new" {
		t.Errorf("URL = %q after the retry, want the declared one", got)
	}
}
