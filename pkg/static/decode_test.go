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

package static

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

const (
	staticEntryYAML = `apiVersion: spire.spiffe.io/v1alpha1
kind: ClusterStaticEntry
metadata:
  name: db
spec:
  spiffeID: spiffe://example.org/db
  parentID: spiffe://example.org/spire/server
  selectors: ["unix:uid:999"]
`
	trustDomainYAML = `apiVersion: spire.spiffe.io/v1alpha1
kind: ClusterFederatedTrustDomain
metadata:
  name: partner
spec:
  trustDomain: partner.org
  bundleEndpointURL: https://partner.org/bundle
  bundleEndpointProfile:
    type: https_web
`
)

func TestDecodeFileReadsEveryDocument(t *testing.T) {
	data := "# leading comment\n---\n" + staticEntryYAML + "---\n# only a comment\n---\n" + trustDomainYAML + "---\n"
	objs, err := decodeFile([]byte(data), false)
	if err != nil {
		t.Fatal(err)
	}
	want := []object{
		&spirev1alpha1.ClusterStaticEntry{
			TypeMeta:   metav1.TypeMeta{APIVersion: "spire.spiffe.io/v1alpha1", Kind: "ClusterStaticEntry"},
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: spirev1alpha1.ClusterStaticEntrySpec{SPIFFEID: "spiffe://example.org/db",
				ParentID: "spiffe://example.org/spire/server", Selectors: []string{"unix:uid:999"}},
		},
		&spirev1alpha1.ClusterFederatedTrustDomain{
			TypeMeta:   metav1.TypeMeta{APIVersion: "spire.spiffe.io/v1alpha1", Kind: "ClusterFederatedTrustDomain"},
			ObjectMeta: metav1.ObjectMeta{Name: "partner"},
			Spec: spirev1alpha1.ClusterFederatedTrustDomainSpec{TrustDomain: "partner.org",
				BundleEndpointURL:     "https://partner.org/bundle",
				BundleEndpointProfile: spirev1alpha1.BundleEndpointProfile{Type: spirev1alpha1.HTTPSWebProfileType}},
		},
	}
	if diff := cmp.Diff(want, objs); diff != "" {
		t.Errorf("decoded objects (-want +got):\n%s", diff)
	}
}

// TestDecodeFileReadsTheExamples keeps the published examples usable as static manifests.
func TestDecodeFileReadsTheExamples(t *testing.T) {
	for _, name := range []string{"clusterstaticentry.yaml", "clusterfederatedtrustdomain.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeFile(data, false)
		if err != nil || len(objs) == 0 {
			t.Errorf("%s: %d objects, err %v", name, len(objs), err)
		}
	}
}

func TestDecodeFileDropsWhatTheAPIServerOwns(t *testing.T) {
	data := strings.Replace(staticEntryYAML, "  name: db\n",
		"  name: db\n  uid: 1234\n  resourceVersion: \"99\"\n  generation: 7\n  creationTimestamp: \"2020-01-01T00:00:00Z\"\n", 1)
	objs, err := decodeFile([]byte(data), false)
	if err != nil {
		t.Fatal(err)
	}
	o := objs[0]
	if o.GetUID() != "" || o.GetResourceVersion() != "" || o.GetGeneration() != 0 || !o.GetCreationTimestamp().Time.IsZero() {
		t.Errorf("server-owned metadata kept: %+v", o)
	}
}

func TestDecodeFileExpandsEnvironment(t *testing.T) {
	t.Setenv("SR_TEST_TD", "example.org")
	data := strings.ReplaceAll(staticEntryYAML, "example.org", "${SR_TEST_TD}")
	objs, err := decodeFile([]byte(data), true)
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].(*spirev1alpha1.ClusterStaticEntry).Spec.SPIFFEID; got != "spiffe://example.org/db" {
		t.Errorf("spiffeID = %q", got)
	}
	// Without expandEnvStaticManifests the text is taken literally.
	objs, err = decodeFile([]byte(data), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].(*spirev1alpha1.ClusterStaticEntry).Spec.SPIFFEID; got != "spiffe://${SR_TEST_TD}/db" {
		t.Errorf("spiffeID = %q", got)
	}
}

func TestDecodeFileRejectsMalformedManifests(t *testing.T) {
	replace := func(old, new string) string { return strings.Replace(staticEntryYAML, old, new, 1) }
	for _, tc := range []struct {
		name, data string
		expandEnv  bool
		want       string
	}{
		{"ClusterSPIFFEID", "apiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterSPIFFEID\nmetadata: {name: a}\nspec: {}\n", false, "ClusterSPIFFEID is not supported in static mode"},
		{"other kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", false, `apiVersion "v1"`},
		{"other version", replace("v1alpha1", "v1beta1"), false, "v1beta1"},
		{"unknown kind", replace("ClusterStaticEntry", "ClusterStaticEntri"), false, `kind "ClusterStaticEntri"`},
		{"no kind", replace("kind: ClusterStaticEntry\n", ""), false, `kind ""`},
		{"no apiVersion", replace("apiVersion: spire.spiffe.io/v1alpha1\n", ""), false, "apiVersion"},
		{"unknown field", replace("  selectors:", "  selector: [a]\n  selectors:"), false, `unknown field "selector"`},
		{"misspelt metadata", replace("metadata:", "metdata:"), false, "metdata"},
		{"no name", replace("  name: db\n", "  labels: {a: b}\n"), false, "metadata.name is required"},
		{"bad name", replace("name: db", "name: DB_1"), false, "metadata.name"},
		{"namespaced", replace("  name: db\n", "  name: db\n  namespace: default\n"), false, "metadata.namespace"},
		{"wrong type", replace(`selectors: ["unix:uid:999"]`, "selectors: unix:uid:999"), false, "selectors"},
		{"bad duration", replace("  selectors:", "  x509SVIDTTL: 1d\n  selectors:"), false, "1d"},
		{"not YAML", "apiVersion: [\n", false, "document 1"},
		{"tab indentation", replace("  name: db", "\tname: db"), false, "document 1"},
		{"second document broken", staticEntryYAML + "---\nkind: [\n", false, "document 2"},
		{"env var not set", replace("example.org/db", "$SR_TEST_NOT_SET/db"), true, "SR_TEST_NOT_SET"},
		{"env vars not set", replace("example.org/db", "${SR_TEST_A}/${SR_TEST_B}"), true, "SR_TEST_A, SR_TEST_B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := decodeFile([]byte(tc.data), tc.expandEnv)
			if err == nil {
				t.Fatalf("decoded %d objects, want an error", len(objs))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
