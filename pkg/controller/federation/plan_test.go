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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiretypes "github.com/spiffe/spire-api-sdk/proto/spire/api/types"
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
				gotProblems = append(gotProblems, p.obj.Name+":"+p.reason)
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
	withBundle := func(r *spiretypes.FederationRelationship, seq uint64) *spiretypes.FederationRelationship {
		r.TrustDomainBundle = &spiretypes.Bundle{TrustDomain: r.TrustDomain, SequenceNumber: seq,
			X509Authorities: []*spiretypes.X509Certificate{{Asn1: []byte("ca")}}}
		return r
	}
	decl := func(r *spiretypes.FederationRelationship) *declaration {
		return &declaration{trustDomain: r.GetTrustDomain(), owner: cftd("owner", 0, webSpec(r.GetTrustDomain(), "")), relationship: r}
	}
	invalid := func(td string) *declaration {
		return &declaration{trustDomain: td, owner: cftd("broken", 0, webSpec(td, ""))}
	}

	tests := []struct {
		name       string
		decls      []*declaration
		current    []*spiretypes.FederationRelationship
		wantCreate []string
		// wantUpdate lists "td:field,field".
		wantUpdate []string
		wantDelete []string
	}{
		{name: "missing is created", decls: []*declaration{decl(web("a.org", "https://a/"))}, wantCreate: []string{"a.org"}},
		{name: "equal is left", decls: []*declaration{decl(web("a.org", "https://a/"))}, current: []*spiretypes.FederationRelationship{webEcho("a.org", "https://a/")}},
		{name: "URL differs", decls: []*declaration{decl(web("a.org", "https://a/new"))}, current: []*spiretypes.FederationRelationship{web("a.org", "https://a/")},
			wantUpdate: []string{"a.org:bundleEndpointURL"}},
		{name: "profile type differs", decls: []*declaration{decl(spiffe("a.org", "https://a/", "spiffe://a.org/s"))}, current: []*spiretypes.FederationRelationship{web("a.org", "https://a/")},
			wantUpdate: []string{"a.org:bundleEndpointProfile"}},
		{name: "endpoint SPIFFE ID differs", decls: []*declaration{decl(spiffe("a.org", "https://a/", "spiffe://a.org/new"))},
			current:    []*spiretypes.FederationRelationship{spiffe("a.org", "https://a/", "spiffe://a.org/s")},
			wantUpdate: []string{"a.org:bundleEndpointProfile"}},
		{name: "declared bundle differs", decls: []*declaration{decl(withBundle(web("a.org", "https://a/"), 2))},
			current:    []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 1)},
			wantUpdate: []string{"a.org:trustDomainBundle"}},
		{name: "declared bundle SPIRE lacks", decls: []*declaration{decl(withBundle(web("a.org", "https://a/"), 1))},
			current:    []*spiretypes.FederationRelationship{web("a.org", "https://a/")},
			wantUpdate: []string{"a.org:trustDomainBundle"}},
		{name: "undeclared bundle SPIRE holds is no difference", decls: []*declaration{decl(web("a.org", "https://a/"))},
			current: []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 9)}},
		{name: "everything differs", decls: []*declaration{decl(withBundle(spiffe("a.org", "https://a/new", "spiffe://a.org/s"), 2))},
			current:    []*spiretypes.FederationRelationship{withBundle(web("a.org", "https://a/"), 1)},
			wantUpdate: []string{"a.org:bundleEndpointURL,bundleEndpointProfile,trustDomainBundle"}},
		{name: "undeclared is deleted", current: []*spiretypes.FederationRelationship{web("a.org", "https://a/"), web("b.org", "https://b/")},
			decls: []*declaration{decl(web("b.org", "https://b/"))}, wantDelete: []string{"a.org"}},
		{name: "invalid declaration leaves SPIRE alone", decls: []*declaration{invalid("a.org"), invalid("new.org")},
			current: []*spiretypes.FederationRelationship{web("a.org", "https://a/")}},
		{name: "sorted output", decls: []*declaration{decl(web("c.org", "https://c/")), decl(web("a.org", "https://a/"))},
			current: []*spiretypes.FederationRelationship{web("z.org", "https://z/"), web("y.org", "https://y/")}, wantCreate: []string{"a.org", "c.org"}, wantDelete: []string{"y.org", "z.org"}},
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
			p := reconcile(decls, current)
			var gotCreate, gotUpdate []string
			for _, d := range p.toCreate {
				gotCreate = append(gotCreate, d.trustDomain)
			}
			for _, u := range p.toUpdate {
				gotUpdate = append(gotUpdate, u.trustDomain+":"+strings.Join(u.outdated, ","))
			}
			if !slices.Equal(gotCreate, tt.wantCreate) || !slices.Equal(gotUpdate, tt.wantUpdate) || !slices.Equal(p.toDelete, tt.wantDelete) {
				t.Errorf("plan = create %v update %v delete %v, want create %v update %v delete %v",
					gotCreate, gotUpdate, p.toDelete, tt.wantCreate, tt.wantUpdate, tt.wantDelete)
			}
		})
	}
}

func TestUpdateMask(t *testing.T) {
	m := updateMask(&spiretypes.FederationRelationship{})
	if !m.BundleEndpointUrl || !m.BundleEndpointProfile || m.TrustDomainBundle {
		t.Errorf("mask without bundle = %v", m)
	}
	m = updateMask(&spiretypes.FederationRelationship{TrustDomainBundle: &spiretypes.Bundle{}})
	if !m.BundleEndpointUrl || !m.BundleEndpointProfile || !m.TrustDomainBundle {
		t.Errorf("mask with bundle = %v", m)
	}
}
