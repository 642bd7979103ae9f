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
	"crypto/x509"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// refresh makes SPIRE hold a bundle it fetched from the endpoint itself, as it does once the
// other side rotates its CA, and returns the relationship SPIRE then holds.
func (env *testEnv) refresh(td string, ca *x509.Certificate, seq uint64) *spiretypes.FederationRelationship {
	env.t.Helper()
	r := proto.CloneOf(env.rel(td))
	r.TrustDomainBundle = &spiretypes.Bundle{TrustDomain: td, SequenceNumber: seq,
		X509Authorities: []*spiretypes.X509Certificate{{Asn1: ca.Raw}}}
	env.spire.SetRelationships(r)
	env.spire.ResetCalls()
	return proto.CloneOf(r)
}

// expectRel checks SPIRE's relationship with a trust domain field by field.
func (env *testEnv) expectRel(want *spiretypes.FederationRelationship) {
	env.t.Helper()
	if diff := cmp.Diff(want, env.rel(want.TrustDomain), protocmp.Transform()); diff != "" {
		env.t.Errorf("SPIRE's relationship (-want +got):\n%s", diff)
	}
}

// TestBootstrapBundleIsNotWrittenBack: the resource's bundle is sent on create and when the
// resource's own bundle changes; a bundle SPIRE refreshed from the endpoint is never
// overwritten with the resource's old copy, by a sync, a full resync, or an update of
// another field.
func TestBootstrapBundleIsNotWrittenBack(t *testing.T) {
	bootstrap, rotated, edited := newCA(t, "fed.org"), newCA(t, "fed.org"), newCA(t, "fed.org")
	obj := cftd("fed", time.Hour, spiffeSpec("fed.org", "https://fed.org/bundle", "spiffe://fed.org/spire/server",
		bundleDoc(t, "fed.org", []*x509.Certificate{bootstrap}, nil, time.Minute, 1)))
	env := newTestEnv(t, obj)
	env.fullResync()
	env.expectWrites(1)
	if got := firstCA(env.rel("fed.org")); string(got) != string(bootstrap.Raw) {
		t.Fatal("the create did not send the bootstrap bundle")
	}

	want := env.refresh("fed.org", rotated, 2)
	env.sync("fed.org")
	env.fullResync()
	env.expectWrites(0)
	env.expectRel(want)

	// An edit of another field updates that field only.
	obj = obj.DeepCopy()
	obj.Spec.BundleEndpointURL, obj.ResourceVersion = "https://fed.org/v2", "2"
	env.set(obj)
	env.sync("fed.org")
	env.expectWrites(1)
	want.BundleEndpointUrl = "https://fed.org/v2"
	env.expectRel(want)

	// An edit of the resource's bundle is sent.
	obj = obj.DeepCopy()
	obj.Spec.TrustDomainBundle, obj.ResourceVersion = bundleDoc(t, "fed.org", []*x509.Certificate{edited}, nil, time.Minute, 3), "3"
	env.set(obj)
	env.sync("fed.org")
	env.expectWrites(1)
	if got := env.rel("fed.org"); string(firstCA(got)) != string(edited.Raw) || got.GetTrustDomainBundle().GetSequenceNumber() != 3 {
		t.Errorf("the edited bundle was not sent: SPIRE holds %v", got)
	}
	env.fullResync()
	env.expectWrites(0)
}

// TestRestartDoesNotRewriteBundle: a controller that starts on a SPIRE server holding the
// relationship (its own from before a restart, or spire-controller-manager's) rewrites
// nothing, though SPIRE's bundle differs from the resource's.
func TestRestartDoesNotRewriteBundle(t *testing.T) {
	bootstrap, rotated := newCA(t, "fed.org"), newCA(t, "fed.org")
	obj := cftd("fed", time.Hour, spiffeSpec("fed.org", "https://fed.org/bundle", "spiffe://fed.org/spire/server",
		bundleDoc(t, "fed.org", []*x509.Certificate{bootstrap}, nil, time.Minute, 1)))
	held := &spiretypes.FederationRelationship{TrustDomain: "fed.org", BundleEndpointUrl: "https://fed.org/bundle",
		BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsSpiffe{HttpsSpiffe: &spiretypes.HTTPSSPIFFEProfile{EndpointSpiffeId: "spiffe://fed.org/spire/server"}},
		TrustDomainBundle:     &spiretypes.Bundle{TrustDomain: "fed.org", SequenceNumber: 5, X509Authorities: []*spiretypes.X509Certificate{{Asn1: rotated.Raw}}}}
	env := newTestEnv(t, obj)
	env.spire.SetRelationships(proto.CloneOf(held))
	env.spire.ResetCalls()

	env.fullResync()
	env.sync("fed.org")
	env.fullResync()
	env.expectWrites(0)
	env.expectRel(held)

	// The bundle the resource declared at start counts as sent: editing it sends the edit.
	edited := newCA(t, "fed.org")
	obj = obj.DeepCopy()
	obj.Spec.TrustDomainBundle, obj.ResourceVersion = bundleDoc(t, "fed.org", []*x509.Certificate{edited}, nil, time.Minute, 6), "2"
	env.set(obj)
	env.sync("fed.org")
	env.expectWrites(1)
	if got := env.rel("fed.org"); string(firstCA(got)) != string(edited.Raw) {
		t.Errorf("the edited bundle was not sent: SPIRE holds %v", got)
	}
}
