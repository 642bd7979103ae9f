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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/protobuf/testing/protocmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

func TestDeclarations(t *testing.T) {
	own := spiffeid.RequireTrustDomainFromString("example.org")
	deleting := cftd("deleting", 3*time.Hour, webSpec("gone.org", "https://gone.org/"))
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	// withUID sets a resource's UID, so that the UIDs and names of a tie order differently.
	withUID := func(obj *spirev1alpha1.ClusterFederatedTrustDomain, uid string) *spirev1alpha1.ClusterFederatedTrustDomain {
		obj.UID = ktypes.UID(uid)
		return obj
	}
	// beingDeleted marks a resource as being deleted.
	beingDeleted := func(obj *spirev1alpha1.ClusterFederatedTrustDomain) *spirev1alpha1.ClusterFederatedTrustDomain {
		obj.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		return obj
	}
	otherClass := cftd("other-class", 3*time.Hour, webSpec("other.org", "https://other.org/"))
	otherClass.Spec.ClassName = "other"

	tests := []struct {
		name string
		objs []*spirev1alpha1.ClusterFederatedTrustDomain
		// want maps each declared trust domain to its owner's name, suffixed with "!" when
		// its spec is invalid.
		want map[string]string
		// wantProblems lists "name:reason".
		wantProblems []string
	}{
		{
			name: "one resource per trust domain",
			objs: []*spirev1alpha1.ClusterFederatedTrustDomain{
				cftd("a", time.Hour, webSpec("a.org", "https://a.org/")),
				cftd("b", time.Hour, webSpec("b.org", "https://b.org/")),
			},
			want: map[string]string{"a.org": "a", "b.org": "b"},
		},
		{
			name: "oldest wins",
			objs: []*spirev1alpha1.ClusterFederatedTrustDomain{
				cftd("young", time.Minute, webSpec("fed.org", "https://young/")),
				cftd("old", time.Hour, webSpec("fed.org", "https://old/")),
			},
			want:         map[string]string{"fed.org": "old"},
			wantProblems: []string{"young:Conflict"},
		},
		{
			name: "same age: the lower UID wins, not the name",
			objs: []*spirev1alpha1.ClusterFederatedTrustDomain{
				withUID(cftd("zeta", time.Hour, webSpec("fed.org", "https://z/")), "uid-1"),
				withUID(cftd("alpha", time.Hour, webSpec("fed.org", "https://a/")), "uid-2"),
			},
			want:         map[string]string{"fed.org": "zeta"},
			wantProblems: []string{"alpha:Conflict"},
		},
		{
			name: "same age: a resource not being deleted wins over one being deleted, whatever the UIDs",
			objs: []*spirev1alpha1.ClusterFederatedTrustDomain{
				withUID(beingDeleted(cftd("leaving", time.Hour, webSpec("fed.org", "https://l/"))), "uid-1"),
				withUID(cftd("staying", time.Hour, webSpec("fed.org", "https://s/")), "uid-2"),
			},
			want:         map[string]string{"fed.org": "staying"},
			wantProblems: []string{"leaving:Conflict"},
		},
		{
			name: "an older resource being deleted still wins",
			objs: []*spirev1alpha1.ClusterFederatedTrustDomain{
				beingDeleted(cftd("old-leaving", time.Hour, webSpec("fed.org", "https://l/"))),
				cftd("young", time.Minute, webSpec("fed.org", "https://y/")),
			},
			want:         map[string]string{"fed.org": "old-leaving"},
			wantProblems: []string{"young:Conflict"},
		},
		{
			name: "a resource being deleted still declares; one of another class does not",
			objs: []*spirev1alpha1.ClusterFederatedTrustDomain{deleting, otherClass},
			want: map[string]string{"gone.org": "deleting"},
		},
		{
			name: "invalid spec still declares its trust domain",
			objs: []*spirev1alpha1.ClusterFederatedTrustDomain{
				cftd("bad-url", time.Hour, webSpec("fed.org", "http://fed.org/")),
				cftd("as-id", time.Hour, webSpec("spiffe://id.org", "https://id.org/")),
			},
			want:         map[string]string{"fed.org": "bad-url!", "id.org": "as-id!"},
			wantProblems: []string{"as-id:InvalidSpec", "bad-url:InvalidSpec"},
		},
		{
			name: "an invalid oldest resource still wins: a typo freezes the relationship rather than handing it over",
			objs: []*spirev1alpha1.ClusterFederatedTrustDomain{
				cftd("old-broken", time.Hour, webSpec("fed.org", "http://fed.org/")),
				cftd("young-valid", time.Minute, webSpec("fed.org", "https://fed.org/")),
			},
			want:         map[string]string{"fed.org": "old-broken!"},
			wantProblems: []string{"old-broken:InvalidSpec", "young-valid:Conflict"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decls, problems := declarations(tt.objs, own, func(class string) bool { return class != "other" })
			got := map[string]string{}
			for td, d := range decls {
				if d.trustDomain != td {
					t.Errorf("declaration keyed %q names %q", td, d.trustDomain)
				}
				got[td] = d.owner.Name
				if d.relationship == nil {
					got[td] += "!"
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("declarations (-want +got):\n%s", diff)
			}
			var gotProblems []string
			for _, p := range problems {
				gotProblems = append(gotProblems, p.Object.Name+":"+p.Reason)
			}
			if diff := cmp.Diff(tt.wantProblems, gotProblems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	web := func(td, url string) *spiretypes.FederationRelationship {
		return &spiretypes.FederationRelationship{TrustDomain: td, BundleEndpointUrl: url,
			BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsWeb{HttpsWeb: &spiretypes.HTTPSWebProfile{}}}
	}
	// SPIRE echoes https_web as an empty wrapper.
	webEcho := func(td, url string) *spiretypes.FederationRelationship {
		r := web(td, url)
		r.BundleEndpointProfile = &spiretypes.FederationRelationship_HttpsWeb{}
		return r
	}
	spiffe := func(td, url, id string) *spiretypes.FederationRelationship {
		return &spiretypes.FederationRelationship{TrustDomain: td, BundleEndpointUrl: url,
			BundleEndpointProfile: &spiretypes.FederationRelationship_HttpsSpiffe{HttpsSpiffe: &spiretypes.HTTPSSPIFFEProfile{EndpointSpiffeId: id}}}
	}
	bundle := func(td string, seq uint64) *spiretypes.Bundle {
		return &spiretypes.Bundle{TrustDomain: td, SequenceNumber: seq, X509Authorities: []*spiretypes.X509Certificate{{Asn1: []byte("ca")}}}
	}
	withBundle := func(r *spiretypes.FederationRelationship, seq uint64) *spiretypes.FederationRelationship {
		r.TrustDomainBundle = bundle(r.TrustDomain, seq)
		return r
	}
	decl := func(r *spiretypes.FederationRelationship) *declaration {
		return &declaration{trustDomain: r.GetTrustDomain(), owner: cftd("owner", 0, webSpec(r.GetTrustDomain(), "")), relationship: r}
	}
	invalid := func(td string) *declaration {
		return &declaration{trustDomain: td, owner: cftd("broken", 0, webSpec(td, ""))}
	}
	// sentSeq records, per trust domain, the sequence number of the bundle last sent (0: sent
	// without a bundle).
	type sentSeq map[string]uint64

	// summary is what a plan writes, in words a test can compare.
	type summary struct {
		Create []string
		// Update lists "td:field,field".
		Update          []string
		Delete          []string
		Adopt           []string
		InSync, Invalid int
	}
	tests := []struct {
		name    string
		decls   []*declaration
		current []*spiretypes.FederationRelationship
		// sent are the bundles last sent; nil means every declared bundle was sent, as in
		// a controller that created what it declares.
		sent sentSeq
		want summary
	}{
		{name: "missing is created", decls: []*declaration{decl(web("a.org", "https://a/"))}, want: summary{Create: []string{"a.org"}}},
		{name: "equal is left", decls: []*declaration{decl(web("a.org", "https://a/"))}, current: []*spiretypes.FederationRelationship{webEcho("a.org", "https://a/")},
			want: summary{InSync: 1}},
		{name: "URL differs", decls: []*declaration{decl(web("a.org", "https://a/new"))}, current: []*spiretypes.FederationRelationship{web("a.org", "https://a/")},
			want: summary{Update: []string{"a.org:bundleEndpointURL"}}},
		{name: "profile type differs", decls: []*declaration{decl(spiffe("a.org", "https://a/", "spiffe://a.org/s"))}, current: []*spiretypes.FederationRelationship{web("a.org", "https://a/")},
			want: summary{Update: []string{"a.org:bundleEndpointProfile"}}},
		{name: "endpoint SPIFFE ID differs", decls: []*declaration{decl(spiffe("a.org", "https://a/", "spiffe://a.org/new"))},
			current: []*spiretypes.FederationRelationship{spiffe("a.org", "https://a/", "spiffe://a.org/s")},
			want:    summary{Update: []string{"a.org:bundleEndpointProfile"}}},
		{name: "SPIRE refreshed the bundle: no difference", decls: []*declaration{decl(withBundle(web("a.org", "https://a/"), 1))},
			current: []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 7)},
			want:    summary{InSync: 1}},
		{name: "SPIRE holds no bundle for a declared one already sent: no difference", decls: []*declaration{decl(withBundle(web("a.org", "https://a/"), 1))},
			current: []*spiretypes.FederationRelationship{web("a.org", "https://a/")},
			want:    summary{InSync: 1}},
		{name: "the resource's bundle changed since sent", decls: []*declaration{decl(withBundle(web("a.org", "https://a/"), 2))},
			current: []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 7)}, sent: sentSeq{"a.org": 1},
			want: summary{Update: []string{"a.org:trustDomainBundle"}}},
		{name: "a bundle added to a resource created without one", decls: []*declaration{decl(withBundle(web("a.org", "https://a/"), 1))},
			current: []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 7)}, sent: sentSeq{"a.org": 0},
			want: summary{Update: []string{"a.org:trustDomainBundle"}}},
		{name: "after a restart, an existing relationship is adopted: its bundle is not rewritten", decls: []*declaration{decl(withBundle(web("a.org", "https://a/"), 1))},
			current: []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 7)}, sent: sentSeq{},
			want: summary{Adopt: []string{"a.org"}, InSync: 1}},
		{name: "after a restart, other fields are updated without the bundle", decls: []*declaration{decl(withBundle(spiffe("a.org", "https://a/new", "spiffe://a.org/s"), 1))},
			current: []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 7)}, sent: sentSeq{},
			want: summary{Update: []string{"a.org:bundleEndpointURL,bundleEndpointProfile"}, Adopt: []string{"a.org"}}},
		{name: "undeclared bundle SPIRE holds is no difference", decls: []*declaration{decl(web("a.org", "https://a/"))},
			current: []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 9)}, sent: sentSeq{"a.org": 3},
			want: summary{InSync: 1}},
		{name: "everything differs", decls: []*declaration{decl(withBundle(spiffe("a.org", "https://a/new", "spiffe://a.org/s"), 2))},
			current: []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 1)}, sent: sentSeq{"a.org": 1},
			want: summary{Update: []string{"a.org:bundleEndpointURL,bundleEndpointProfile,trustDomainBundle"}}},
		{name: "undeclared is deleted", current: []*spiretypes.FederationRelationship{web("a.org", "https://a/"), web("b.org", "https://b/")},
			decls: []*declaration{decl(web("b.org", "https://b/"))}, want: summary{Delete: []string{"a.org"}, InSync: 1}},
		{name: "invalid declaration leaves SPIRE alone", decls: []*declaration{invalid("a.org"), invalid("new.org")},
			current: []*spiretypes.FederationRelationship{web("a.org", "https://a/")}, want: summary{Invalid: 2}},
		{name: "sorted output", decls: []*declaration{decl(web("c.org", "https://c/")), decl(web("a.org", "https://a/"))},
			current: []*spiretypes.FederationRelationship{web("z.org", "https://z/"), web("y.org", "https://y/")},
			want:    summary{Create: []string{"a.org", "c.org"}, Delete: []string{"y.org", "z.org"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decls := map[string]*declaration{}
			for _, d := range tt.decls {
				decls[d.trustDomain] = d
			}
			current := map[string]*spiretypes.FederationRelationship{}
			for _, r := range tt.current {
				current[r.TrustDomain] = r
			}
			lastSent := func(td string) (*spiretypes.Bundle, bool) {
				if tt.sent == nil {
					if d := decls[td]; d != nil {
						return d.relationship.GetTrustDomainBundle(), true
					}
					return nil, false
				}
				seq, ok := tt.sent[td]
				if !ok || seq == 0 {
					return nil, ok
				}
				return bundle(td, seq), true
			}
			p := reconcile(decls, current, lastSent)
			got := summary{Delete: p.toDelete, InSync: p.inSync, Invalid: p.invalid}
			for _, d := range p.toCreate {
				got.Create = append(got.Create, d.trustDomain)
			}
			for _, u := range p.toUpdate {
				got.Update = append(got.Update, u.trustDomain+":"+strings.Join(u.outdated, ","))
			}
			for _, d := range p.toAdopt {
				got.Adopt = append(got.Adopt, d.trustDomain)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdateMask(t *testing.T) {
	want := &spiretypes.FederationRelationshipMask{BundleEndpointUrl: true, BundleEndpointProfile: true}
	if diff := cmp.Diff(want, updateMask(false), protocmp.Transform()); diff != "" {
		t.Errorf("mask of an update without the bundle (-want +got):\n%s", diff)
	}
	want.TrustDomainBundle = true
	if diff := cmp.Diff(want, updateMask(true), protocmp.Transform()); diff != "" {
		t.Errorf("mask of an update with the bundle (-want +got):\n%s", diff)
	}
}
