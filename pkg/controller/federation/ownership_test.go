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
	"slices"
	"testing"
	"time"

	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
)

// TestSharedServerDeletesOnlyWhatItsResourcesGaveUp: with another owner on the server, the
// controller leaves alone relationships it never declared, and deletes one only when a
// resource of its class gives it up.
func TestSharedServerDeletesOnlyWhatItsResourcesGaveUp(t *testing.T) {
	blue := cftd("blue", time.Hour, webSpec("blue.org", "https://blue/"))
	blue.Spec.ClassName = "blue"
	red := cftd("red", time.Hour, webSpec("red.org", "https://red/"))
	red.Spec.ClassName = "red"
	env := newTestEnv(t, blue, red)
	env.setOptions(func(o *Options) { o.SharedServer, o.Class.Name = true, "blue" })

	// Another owner's relationships: one its resource (in view) declares, one out of view.
	if _, err := env.c.spire.CreateFederationRelationships(env.ctx, []*spiretypes.FederationRelationship{
		{TrustDomain: "red.org", BundleEndpointUrl: "https://red/", BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{HttpsWeb: &spiretypes.HTTPSWebProfile{}}},
		{TrustDomain: "elsewhere.org", BundleEndpointUrl: "https://elsewhere/", BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{HttpsWeb: &spiretypes.HTTPSWebProfile{}}},
	}); err != nil {
		t.Fatal(err)
	}
	want := func(tds ...string) {
		t.Helper()
		got := env.trustDomains()
		slices.Sort(got)
		if !slices.Equal(got, tds) {
			t.Fatalf("SPIRE holds %v, want %v", got, tds)
		}
	}

	env.fullResync()
	want("blue.org", "elsewhere.org", "red.org")

	// Deleting another class's resource is not ours to act on.
	env.remove(red)
	env.c.onDelete(red)
	env.sync("red.org")
	env.fullResync()
	want("blue.org", "elsewhere.org", "red.org")

	// Our resource moving to another trust domain gives up the old one.
	moved := blue.DeepCopy()
	moved.Spec.TrustDomain, moved.ResourceVersion = "blue2.org", "2"
	env.set(moved)
	env.c.onUpdate(blue, moved)
	env.sync("blue2.org")
	env.sync("blue.org")
	want("blue2.org", "elsewhere.org", "red.org")

	// Our resource deleted: its relationship goes, whichever path syncs it.
	env.remove(moved)
	env.c.onDelete(moved)
	env.fullResync()
	want("elsewhere.org", "red.org")

	// Moving to another class gives the trust domain up too, unless that class's resource
	// still declares it.
	green := cftd("green", time.Hour, webSpec("red.org", "https://red/"))
	green.Spec.ClassName = "blue"
	env.set(green)
	red.Spec.ClassName = "red"
	env.set(red)
	env.sync("red.org")
	regreen := green.DeepCopy()
	regreen.Spec.ClassName, regreen.ResourceVersion = "red", "2"
	env.set(regreen)
	env.c.onUpdate(green, regreen)
	env.sync("red.org")
	want("elsewhere.org", "red.org")
}

// TestOwnServerDeletesWhatNoResourceDeclares is spire-controller-manager's behaviour, kept
// when the controller has the server to itself.
func TestOwnServerDeletesWhatNoResourceDeclares(t *testing.T) {
	env := newTestEnv(t, cftd("a", time.Hour, webSpec("a.org", "https://a/")))
	if _, err := env.c.spire.CreateFederationRelationships(env.ctx, []*spiretypes.FederationRelationship{
		{TrustDomain: "stray.org", BundleEndpointUrl: "https://stray/", BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{HttpsWeb: &spiretypes.HTTPSWebProfile{}}},
	}); err != nil {
		t.Fatal(err)
	}
	env.fullResync()
	if got := env.trustDomains(); !slices.Equal(got, []string{"a.org"}) {
		t.Errorf("SPIRE holds %v, want [a.org]", got)
	}
}
