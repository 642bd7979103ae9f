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

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/testing/protocmp"
)

func TestRelationshipCache(t *testing.T) {
	rel := func(td, url string) *spiretypes.FederationRelationship {
		return &spiretypes.FederationRelationship{TrustDomain: td, BundleEndpointUrl: url}
	}
	c := newRelationshipCache()
	c.replace([]*spiretypes.FederationRelationship{rel("a.org", "https://a/"), rel("b.org", "https://b/")})
	c.put(rel("c.org", "https://c/"))
	c.put(rel("a.org", "https://a/v2"))
	c.remove("b.org")
	c.remove("never.org")

	want := map[string]*spiretypes.FederationRelationship{"a.org": rel("a.org", "https://a/v2"), "c.org": rel("c.org", "https://c/")}
	all := c.all()
	if diff := cmp.Diff(want, all, protocmp.Transform()); diff != "" {
		t.Errorf("cache (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(rel("a.org", "https://a/v2"), c.get("a.org"), protocmp.Transform()); diff != "" {
		t.Errorf("get(a.org) (-want +got):\n%s", diff)
	}
	if got := c.get("b.org"); got != nil {
		t.Errorf("get(b.org) = %v after remove", got)
	}

	// all is a copy: changing it leaves the cache alone, and a replace leaves it alone.
	delete(all, "a.org")
	c.replace(nil)
	if len(all) != 1 || all["c.org"] == nil {
		t.Errorf("the copy changed with the cache: %v", all)
	}
	if got := c.all(); len(got) != 0 {
		t.Errorf("cache after replace(nil) = %v", got)
	}
}
