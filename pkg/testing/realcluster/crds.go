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

package realcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

const crdReadyTimeout = 60 * time.Second

// CRDsDir returns <repo root>/manifests/crds.
func CRDsDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "manifests", "crds"), nil
}

// ApplyCRDs creates or updates every CustomResourceDefinition found in the
// .yaml/.yml/.json files under dir (multi-document files allowed), then waits
// until each is Established and served by discovery. It returns the names of
// the CRDs applied, in file order. Kustomization files are skipped; a
// document of any other kind is an error.
func ApplyCRDs(ctx context.Context, cfg *rest.Config, dir string) ([]string, error) {
	crds, err := readCRDs(dir)
	if err != nil {
		return nil, err
	}
	return ApplyCRDObjects(ctx, cfg, crds...)
}

// ApplyCRDObjects is ApplyCRDs for CRDs already in memory.
func ApplyCRDObjects(ctx context.Context, cfg *rest.Config, crds ...*apiextensionsv1.CustomResourceDefinition) ([]string, error) {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build apiextensions client: %w", err)
	}
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		if err := applyCRD(ctx, client, crd); err != nil {
			return nil, err
		}
		names = append(names, crd.Name)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	for _, crd := range crds {
		if err := waitCRDReady(ctx, client, disco, crd); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fileCRDs, err := readCRDFile(path)
		if err != nil {
			return err
		}
		crds = append(crds, fileCRDs...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read CRDs from %s: %w", dir, err)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs found under %s", dir)
	}
	return crds, nil
}

func readCRDFile(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: split YAML documents: %w", path, err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i, err)
		}
		if meta.Kind == "" && meta.APIVersion == "" {
			continue // empty or comment-only document
		}
		if strings.HasPrefix(meta.APIVersion, "kustomize.config.k8s.io/") {
			continue // a kustomization listing the CRDs, as manifests/crds has
		}
		if meta.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s document %d: kind %q is not CustomResourceDefinition", path, i, meta.Kind)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i, err)
		}
		crds = append(crds, crd)
	}
}

func applyCRD(ctx context.Context, client apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	_, err := api.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		desired := crd.DeepCopy()
		desired.ResourceVersion = existing.ResourceVersion
		_, err = api.Update(ctx, desired, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update CRD %s: %w", crd.Name, err)
	}
	return nil
}

// waitCRDReady waits for Established and for every served version to be in
// discovery, since clients using a REST mapper fail until then.
func waitCRDReady(ctx context.Context, client apiextensionsclient.Interface, disco discovery.DiscoveryInterface, crd *apiextensionsv1.CustomResourceDefinition) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, readyPollInterval, crdReadyTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		established := false
		for _, c := range got.Status.Conditions {
			switch {
			case c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue:
				established = true
			case c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse:
				return false, fmt.Errorf("CRD %s names not accepted: %s", crd.Name, c.Message)
			}
		}
		if !established {
			last = "not Established"
			return false, nil
		}
		for _, v := range got.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := got.Spec.Group + "/" + v.Name
			list, err := disco.ServerResourcesForGroupVersion(gv)
			if err != nil {
				last = fmt.Sprintf("discovery of %s: %v", gv, err)
				return false, nil
			}
			found := false
			for _, r := range list.APIResources {
				found = found || r.Name == got.Spec.Names.Plural
			}
			if !found {
				last = fmt.Sprintf("%s not yet in discovery of %s", got.Spec.Names.Plural, gv)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for CRD %s (last: %s): %w", crd.Name, last, err)
	}
	return nil
}
