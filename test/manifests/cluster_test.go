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

package manifests_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/spire-registrar/spire-registrar/pkg/testing/realcluster"
)

const (
	// namespace is where the manifests put spire-registrar.
	namespace = "spire-server"
	// fieldManager owns what the tests server-side apply.
	fieldManager = "spire-registrar-test"
)

// The real kube-apiserver is shared by the package's tests and started on first use, with the
// standalone manifests applied, so -short runs never start it.
var (
	sharedOnce sync.Once
	sharedKube *realcluster.Kube
	sharedErr  error
)

// cluster returns the shared kube-apiserver with manifests/ applied by server-side apply, as
// `kubectl apply -k manifests/ --server-side` would, into an existing spire-server namespace.
func cluster(t *testing.T) *realcluster.Kube {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real kube-apiserver; skipped with -short")
	}
	sharedOnce.Do(func() {
		ctx := context.Background()
		start := time.Now()
		sharedKube, sharedErr = realcluster.StartKube(ctx, realcluster.KubeOptions{Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}})
		if sharedErr != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "manifests: kube-apiserver ready in %s\n", time.Since(start).Round(time.Millisecond))
		sharedErr = setUpCluster(ctx, sharedKube.RESTConfig())
	})
	if sharedErr != nil {
		t.Fatalf("setting up the real kube-apiserver: %v", sharedErr)
	}
	return sharedKube
}

func setUpCluster(ctx context.Context, cfg *rest.Config) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The namespace belongs to SPIRE's install, not to the manifests.
	if err := realcluster.EnsureNamespace(ctx, kube, namespace); err != nil {
		return err
	}
	objs, err := render(repoPath("manifests"))
	if err != nil {
		return fmt.Errorf("kustomize manifests/: %w", err)
	}
	return serverSideApply(ctx, cfg, objs)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedKube != nil {
		_ = sharedKube.Stop()
	}
	if err := realcluster.RemoveRegistrarBinary(); err != nil {
		fmt.Fprintf(os.Stderr, "remove the spire-registrar binary: %v\n", err)
	}
	os.Exit(code)
}

// repoPath returns a path in the repository checkout.
func repoPath(elem ...string) string {
	root, err := realcluster.RepoRoot()
	if err != nil {
		panic(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// serverSideApply applies objects as their own field manager: CustomResourceDefinitions
// first, then, once the API server serves them, everything else. Every object must be
// accepted, and each one's namespace must agree with its kind's scope.
func serverSideApply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))

	isCRD := func(o *unstructured.Unstructured) bool {
		return o.GroupVersionKind().GroupKind().String() == "CustomResourceDefinition.apiextensions.k8s.io"
	}
	crds := slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool { return !isCRD(o) })
	rest := slices.DeleteFunc(slices.Clone(objs), isCRD)
	for _, o := range crds {
		if err := applyOne(ctx, dyn, mapper, o); err != nil {
			return err
		}
	}
	for _, o := range rest {
		// A kind a CRD above just introduced is in discovery only once it is established.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			gvk := o.GroupVersionKind()
			if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
				mapper.Reset()
				return false, nil
			} else if err != nil {
				return false, err
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for %s to be served: %w", o.GroupVersionKind(), err)
		}
		if err := applyOne(ctx, dyn, mapper, o); err != nil {
			return err
		}
	}
	return nil
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	id := fmt.Sprintf("%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced != (o.GetNamespace() != "") {
		return fmt.Errorf("%s: namespace %q does not fit the kind's scope %s", id, o.GetNamespace(), mapping.Scope.Name())
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	_, err = dyn.Resource(mapping.Resource).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("server-side apply of %s: %w", id, err)
	}
	return nil
}

// getApplied reads an applied object back from the API server.
func getApplied(ctx context.Context, cfg *rest.Config, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	gvk := o.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	got, err := dyn.Resource(mapping.Resource).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s was not stored: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
	}
	return got, err
}
