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
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzDecodeFile feeds arbitrary manifest files to static mode's decoder: it must never
// panic, and whatever it accepts is a cluster-scoped resource of a kind static mode serves,
// with a valid name and none of the metadata only an API server may set.
func FuzzDecodeFile(f *testing.F) {
	for _, name := range []string{"clusterstaticentry.yaml", "clusterfederatedtrustdomain.yaml"} {
		if data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", name)); err == nil {
			f.Add(data, false)
		}
	}
	f.Add([]byte(staticEntryYAML+"---\n"+trustDomainYAML), false)
	f.Add([]byte("apiVersion: spire.spiffe.io/v1alpha1\nkind: ClusterSPIFFEID\nmetadata: {name: a}\n"), false)
	f.Add([]byte("spiffeID: ${HOME}/$$x/${"), true)
	f.Add([]byte("---\n---\n# c\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, expandEnv bool) {
		objs, err := decodeFile(data, expandEnv)
		if err != nil {
			return
		}
		for _, obj := range objs {
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			if kind != kindStaticEntry && kind != kindTrustDomain {
				t.Fatalf("decoded kind %q", kind)
			}
			if errs := validation.IsDNS1123Subdomain(obj.GetName()); len(errs) > 0 {
				t.Fatalf("decoded name %q: %v", obj.GetName(), errs)
			}
			if obj.GetNamespace() != "" || obj.GetUID() != "" || obj.GetResourceVersion() != "" || obj.GetGeneration() != 0 {
				t.Fatalf("decoded server metadata: %+v", obj)
			}
		}
	})
}
