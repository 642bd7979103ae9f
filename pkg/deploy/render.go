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

// Package deploy renders spire-registrar's kustomize manifests (manifests/ in this repository)
// as `kubectl kustomize` does, so that tests and tools can check and apply them without kubectl
// or kustomize's module tree.
//
// Only the part of kustomize the manifests use is implemented: resources (files and
// directories), components, strategic-merge patches (from a file or inline, with or without a
// target) and the namespace transformer, including its update of RoleBinding and
// ClusterRoleBinding subjects that name a ServiceAccount of the build. Any other kustomization
// field is an error rather than silently ignored. Where kustomize has quirks (a cluster-scoped
// custom resource gets the namespace too) Render has them as well: the package's tests compare
// its output with the real `kubectl kustomize`.
package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

const (
	kindKustomization = "Kustomization"
	kindComponent     = "Component"
)

// kustomizationFileNames are the names kustomize looks for in a directory, in its order.
var kustomizationFileNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustomization is the supported subset of a kustomization file. Decoding is strict, so a
// field outside the subset fails the render instead of being dropped. Like everything else it
// is read as YAML 1.2, as kustomize reads it.
type kustomization struct {
	APIVersion string         `yaml:"apiVersion,omitempty"`
	Kind       string         `yaml:"kind,omitempty"`
	Metadata   map[string]any `yaml:"metadata,omitempty"`
	Namespace  string         `yaml:"namespace,omitempty"`
	Resources  []string       `yaml:"resources,omitempty"`
	Components []string       `yaml:"components,omitempty"`
	Patches    []patchSpec    `yaml:"patches,omitempty"`
}

// patchSpec is one entry of patches: a strategic-merge patch from a file or inline.
type patchSpec struct {
	Path   string    `yaml:"path,omitempty"`
	Patch  string    `yaml:"patch,omitempty"`
	Target *selector `yaml:"target,omitempty"`
}

// selector picks the objects a patch applies to. Empty fields match anything; the name is an
// anchored regular expression, as in kustomize.
type selector struct {
	Group     string `yaml:"group,omitempty"`
	Version   string `yaml:"version,omitempty"`
	Kind      string `yaml:"kind,omitempty"`
	Name      string `yaml:"name,omitempty"`
	Namespace string `yaml:"namespace,omitempty"`
}

// resource is an object being built.
type resource struct {
	obj *unstructured.Unstructured
	// origNamespace is the namespace written in the object's file. kustomize finds the
	// ServiceAccount a binding subject refers to by this original identity.
	origNamespace string
	// source names the file the object came from, for errors.
	source string
}

// clusterScopedKinds are the kinds kustomize's namespace transformer leaves without a
// namespace: those of its built-in schema (kustomize v5.8), checked against `kubectl kustomize`.
// Every other kind gets the namespace, even a cluster-scoped custom resource or a newer built-in
// kind, exactly as kustomize does; applying such an object then fails the scope check instead of
// going unnoticed.
var clusterScopedKinds = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Kind: "ComponentStatus"}:  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                           true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "policy", Kind: "PodSecurityPolicy"}:                                    true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                    true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                      true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                             true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:               true,
}

// Render builds the kustomization in dir and returns its objects in build order.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	r := &renderer{visiting: map[string]bool{}}
	resources, err := r.build(dir, nil, kindKustomization)
	if err != nil {
		return nil, err
	}
	if err := checkUnique(resources); err != nil {
		return nil, err
	}
	updateSubjects(resources)
	objs := make([]*unstructured.Unstructured, len(resources))
	for i, res := range resources {
		objs[i] = res.obj
	}
	return objs, nil
}

// renderer holds the state of one Render.
type renderer struct {
	// visiting holds the directories being built, to report cycles instead of recursing forever.
	visiting map[string]bool
}

// build runs the kustomization (want == Kustomization) or component (want == Component) in dir.
// A kustomization starts from nothing; a component transforms acc, what its parent built so
// far, as kustomize does.
func (r *renderer) build(dir string, acc []*resource, want string) ([]*resource, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	if r.visiting[dir] {
		return nil, fmt.Errorf("%s: kustomization cycle", dir)
	}
	r.visiting[dir] = true
	defer delete(r.visiting, dir)

	k, file, err := readKustomization(dir)
	if err != nil {
		return nil, err
	}
	kind := k.Kind
	if kind == "" {
		kind = kindKustomization
	}
	if kind != want {
		return nil, fmt.Errorf("%s: kind %s, but it is used as a %s", file, kind, want)
	}

	for _, entry := range k.Resources {
		path, err := localPath(dir, entry)
		if err != nil {
			return nil, fmt.Errorf("%s: resources: %w", file, err)
		}
		info, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%s: resources: %w", file, err)
		}
		if info.IsDir() {
			sub, err := r.build(path, nil, kindKustomization)
			if err != nil {
				return nil, err
			}
			acc = append(acc, sub...)
			continue
		}
		objs, err := readObjects(path)
		if err != nil {
			return nil, err
		}
		acc = append(acc, objs...)
	}
	for _, entry := range k.Components {
		path, err := localPath(dir, entry)
		if err != nil {
			return nil, fmt.Errorf("%s: components: %w", file, err)
		}
		if acc, err = r.build(path, acc, kindComponent); err != nil {
			return nil, err
		}
	}
	for i, p := range k.Patches {
		if err := applyPatch(dir, p, acc); err != nil {
			return nil, fmt.Errorf("%s: patches[%d]: %w", file, i, err)
		}
	}
	if k.Namespace != "" {
		setNamespace(acc, k.Namespace)
	}
	return acc, nil
}

// readKustomization reads and strictly decodes the kustomization file in dir.
func readKustomization(dir string) (*kustomization, string, error) {
	for _, name := range kustomizationFileNames {
		file := filepath.Join(dir, name)
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("reading kustomization: %w", err)
		}
		var k kustomization
		dec := yamlv3.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&k); err != nil && !errors.Is(err, io.EOF) {
			return nil, "", fmt.Errorf("%s: %w (only resources, components, patches and namespace are supported)", file, err)
		}
		return &k, file, nil
	}
	return nil, "", fmt.Errorf("%s: no kustomization file (%s)", dir, strings.Join(kustomizationFileNames, ", "))
}

// localPath resolves a kustomization entry relative to its directory. Remote bases are not
// supported.
func localPath(dir, entry string) (string, error) {
	if strings.Contains(entry, "://") || strings.HasPrefix(entry, "github.com/") {
		return "", fmt.Errorf("remote resource %q is not supported", entry)
	}
	if filepath.IsAbs(entry) {
		// kustomize refuses absolute paths too: a kustomization must be relocatable.
		return "", fmt.Errorf("absolute path %q is not allowed", entry)
	}
	return filepath.Join(dir, entry), nil
}

// readObjects reads every object of a (multi-document) YAML or JSON file.
func readObjects(path string) ([]*resource, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	objs, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]*resource, len(objs))
	for i, obj := range objs {
		out[i] = &resource{obj: obj, origNamespace: obj.GetNamespace(), source: path}
	}
	return out, nil
}

func splitDocuments(data []byte, name string) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: splitting YAML documents: %w", name, err)
		}
		docs = append(docs, doc)
	}
}

// Decode reads the objects of a multi-document YAML (or JSON) stream as kustomize reads its
// inputs and writes its output: as YAML 1.2, where n, yes or off are strings, not booleans.
// Empty and comment-only documents are skipped.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := splitDocuments(data, "input")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i, doc := range docs {
		obj, err := decodeObject(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
	return out, nil
}

// decodeObject decodes one document; nil for an empty or comment-only one. It goes through
// JSON so that numbers become int64, as in every unstructured object from the API.
func decodeObject(doc []byte) (*unstructured.Unstructured, error) {
	var v any
	if err := yamlv3.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	switch v.(type) {
	case nil:
		return nil, nil
	case []any:
		return nil, errors.New("a list is not an object (JSON 6902 patches are not supported)")
	case map[string]any:
	default:
		return nil, fmt.Errorf("a %T is not an object", v)
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		return nil, err
	}
	if obj.GetAPIVersion() == "" || obj.GetName() == "" {
		return nil, fmt.Errorf("%s has no apiVersion or no metadata.name", obj.GetKind())
	}
	return obj, nil
}

// applyPatch applies a strategic-merge patch to the objects it selects. Without a target the
// patch selects the object of its own kind, name and namespace, which must exist; with one, no
// match is not an error (both as in kustomize).
func applyPatch(dir string, p patchSpec, acc []*resource) error {
	var data []byte
	switch {
	case p.Path != "" && p.Patch != "":
		return errors.New("both path and patch are set")
	case p.Path != "":
		path, err := localPath(dir, p.Path)
		if err != nil {
			return err
		}
		if data, err = os.ReadFile(path); err != nil {
			return fmt.Errorf("reading patch: %w", err)
		}
	case p.Patch != "":
		data = []byte(p.Patch)
	default:
		return errors.New("neither path nor patch is set")
	}
	docs, err := splitDocuments(data, "patch")
	if err != nil {
		return err
	}
	var patch *unstructured.Unstructured
	for _, doc := range docs {
		obj, err := decodeObject(doc)
		if err != nil {
			return fmt.Errorf("decoding patch: %w", err)
		}
		if obj != nil && patch != nil {
			return errors.New("a patch must hold one object")
		}
		if obj != nil {
			patch = obj
		}
	}
	if patch == nil {
		return errors.New("empty patch")
	}

	sel := p.Target
	if sel == nil {
		gvk := patch.GroupVersionKind()
		sel = &selector{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Name: regexp.QuoteMeta(patch.GetName()), Namespace: patch.GetNamespace()}
	}
	matched := 0
	for _, res := range acc {
		ok, err := sel.matches(res.obj, p.Target == nil)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		matched++
		if err := mergePatch(res, patch); err != nil {
			return err
		}
	}
	if matched == 0 && p.Target == nil {
		return fmt.Errorf("no object matches the patch for %s %s", patch.GetKind(), patch.GetName())
	}
	return nil
}

// matches reports whether the selector picks obj. Without a target the namespace must be equal
// too ("" and "default" being the same); a target's empty namespace matches any.
func (s *selector) matches(obj *unstructured.Unstructured, exactNamespace bool) (bool, error) {
	gvk := obj.GroupVersionKind()
	if (s.Group != "" && s.Group != gvk.Group) || (s.Version != "" && s.Version != gvk.Version) ||
		(s.Kind != "" && s.Kind != gvk.Kind) {
		return false, nil
	}
	if exactNamespace {
		if defaultNamespace(s.Namespace) != defaultNamespace(obj.GetNamespace()) {
			return false, nil
		}
	} else if s.Namespace != "" && s.Namespace != obj.GetNamespace() {
		return false, nil
	}
	if s.Name == "" {
		return true, nil
	}
	re, err := regexp.Compile("^(?:" + s.Name + ")$")
	if err != nil {
		return false, fmt.Errorf("target name: %w", err)
	}
	return re.MatchString(obj.GetName()), nil
}

func defaultNamespace(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// mergePatch applies a strategic-merge patch to one object, using the schema of its Go type
// (lists such as containers and volumes merge by name). The patch's own identity is replaced
// by the target's, so that a target selector can patch an object of another name.
func mergePatch(res *resource, patch *unstructured.Unstructured) error {
	gvk := res.obj.GroupVersionKind()
	schemaObj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return fmt.Errorf("strategic-merge patching %s %s: no Go type for it: %w", gvk, res.obj.GetName(), err)
	}
	p := patch.DeepCopy()
	p.SetGroupVersionKind(gvk)
	p.SetName(res.obj.GetName())
	p.SetNamespace(res.obj.GetNamespace())
	original, err := res.obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", gvk.Kind, res.obj.GetName(), err)
	}
	patchJSON, err := p.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patchJSON, schemaObj)
	if err != nil {
		return fmt.Errorf("patching %s %s: %w", gvk.Kind, res.obj.GetName(), err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(merged); err != nil {
		return fmt.Errorf("decoding patched %s %s: %w", gvk.Kind, res.obj.GetName(), err)
	}
	res.obj = out
	return nil
}

// setNamespace is kustomize's namespace transformer: every object of a kind not known to be
// cluster-scoped moves to ns.
func setNamespace(acc []*resource, ns string) {
	for _, res := range acc {
		if !clusterScopedKinds[res.obj.GroupVersionKind().GroupKind()] {
			res.obj.SetNamespace(ns)
		}
	}
}

// updateSubjects points every RoleBinding and ClusterRoleBinding subject that names a
// ServiceAccount of the build (by its original namespace, as written) at that ServiceAccount's
// final namespace. This is kustomize's name-reference update, which is what lets an overlay
// move the ServiceAccount and its bindings together by setting namespace.
func updateSubjects(resources []*resource) {
	type key struct{ name, namespace string }
	accounts := map[key]string{}
	for _, res := range resources {
		if gvk := res.obj.GroupVersionKind(); gvk.Group == "" && gvk.Kind == "ServiceAccount" {
			accounts[key{res.obj.GetName(), defaultNamespace(res.origNamespace)}] = res.obj.GetNamespace()
		}
	}
	for _, res := range resources {
		gvk := res.obj.GroupVersionKind()
		if gvk.Group != "rbac.authorization.k8s.io" || (gvk.Kind != "RoleBinding" && gvk.Kind != "ClusterRoleBinding") {
			continue
		}
		subjects, found, err := unstructured.NestedSlice(res.obj.Object, "subjects")
		if !found || err != nil {
			continue
		}
		for _, s := range subjects {
			subject, ok := s.(map[string]any)
			if !ok || subject["kind"] != "ServiceAccount" {
				continue
			}
			name, _ := subject["name"].(string)
			namespace, _ := subject["namespace"].(string)
			if ns, ok := accounts[key{name, defaultNamespace(namespace)}]; ok && ns != "" {
				subject["namespace"] = ns
			}
		}
		_ = unstructured.SetNestedSlice(res.obj.Object, subjects, "subjects")
	}
}

// checkUnique fails when two objects have the same kind, namespace and name, which kustomize
// refuses too: one would silently win when applied.
func checkUnique(resources []*resource) error {
	seen := map[string]string{}
	for _, res := range resources {
		gvk := res.obj.GroupVersionKind()
		id := fmt.Sprintf("%s/%s %s/%s", gvk.Group, gvk.Kind, res.obj.GetNamespace(), res.obj.GetName())
		if first, dup := seen[id]; dup {
			return fmt.Errorf("%s is defined twice: in %s and in %s", id, first, res.source)
		}
		seen[id] = res.source
	}
	return nil
}
