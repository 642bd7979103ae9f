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

// Package static serves spire-registrar's static mode: ClusterStaticEntry and
// ClusterFederatedTrustDomain manifests read from a directory instead of a Kubernetes API.
// The files feed informers of the same types the controllers read in a cluster, so the
// controllers run unchanged; a poller turns changes to the files into watch events.
package static

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	spirev1alpha1 "github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// Kinds static mode reads.
const (
	kindStaticEntry = "ClusterStaticEntry"
	kindTrustDomain = "ClusterFederatedTrustDomain"
)

// object is one resource declared by a manifest file.
type object interface {
	runtime.Object
	metav1.Object
}

// decodeFile decodes every YAML document of a manifest file. With expandEnv, $VAR and ${VAR}
// are replaced by environment variables first; one that is not set is an error rather than an
// empty string, which could turn into a wrong SPIFFE ID.
func decodeFile(data []byte, expandEnv bool) ([]object, error) {
	if expandEnv {
		var err error
		if data, err = expandEnvironment(data); err != nil {
			return nil, err
		}
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []object
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isOnlyComments(raw) {
			continue
		}
		obj, err := decodeDocument(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		objs = append(objs, obj)
	}
}

// decodeDocument decodes one document strictly: unknown fields are errors, as with
// kubectl's strict field validation.
func decodeDocument(raw []byte) (object, error) {
	var typeMeta metav1.TypeMeta
	if err := yaml.Unmarshal(raw, &typeMeta); err != nil {
		return nil, err
	}
	if want := spirev1alpha1.SchemeGroupVersion.String(); typeMeta.APIVersion != want {
		return nil, fmt.Errorf("apiVersion %q is not supported, want %q", typeMeta.APIVersion, want)
	}
	var obj object
	switch typeMeta.Kind {
	case kindStaticEntry:
		obj = &spirev1alpha1.ClusterStaticEntry{}
	case kindTrustDomain:
		obj = &spirev1alpha1.ClusterFederatedTrustDomain{}
	case "ClusterSPIFFEID":
		return nil, errors.New("ClusterSPIFFEID is not supported in static mode: it selects pods, which only a Kubernetes cluster has")
	default:
		return nil, fmt.Errorf("kind %q is not supported in static mode, want %s or %s", typeMeta.Kind, kindStaticEntry, kindTrustDomain)
	}
	if err := yaml.UnmarshalStrict(raw, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", typeMeta.Kind, err)
	}
	name := obj.GetName()
	if name == "" {
		return nil, fmt.Errorf("%s: metadata.name is required", typeMeta.Kind)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("%s %q: metadata.name: %s", typeMeta.Kind, name, strings.Join(errs, "; "))
	}
	if obj.GetNamespace() != "" {
		return nil, fmt.Errorf("%s %q: metadata.namespace must not be set: the kind is cluster-scoped", typeMeta.Kind, name)
	}
	// What the API server owns is not the file's to say.
	obj.SetUID("")
	obj.SetResourceVersion("")
	obj.SetGeneration(0)
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetManagedFields(nil)
	return obj, nil
}

func isOnlyComments(raw []byte) bool {
	for line := range strings.Lines(string(raw)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// expandEnvironment replaces $VAR and ${VAR} with the environment's values.
func expandEnvironment(data []byte) ([]byte, error) {
	var missing []string
	expanded := os.Expand(string(data), func(name string) string {
		value, ok := os.LookupEnv(name)
		if !ok && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return value
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("expandEnvStaticManifests: environment variables not set: %s", strings.Join(missing, ", "))
	}
	return []byte(expanded), nil
}
