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

package v1alpha1_test

// The CRDs under manifests/crds are written by hand. These tests hold them to the Go types of
// this package, so that neither can change without the other: every JSON field of a kind must
// be in its schema with a compatible type and every schema property must be a JSON field, a
// fully populated object must survive the API server's pruning untouched, and the CRD's names,
// scope, version and printer columns must match what the clientset and the controller expect.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/spire-registrar/spire-registrar/pkg/apis/spire/v1alpha1"
)

// crdDir is manifests/crds, relative to this package's directory.
const crdDir = "../../../../manifests/crds"

// crdCase ties one CRD file to the Go type of its kind.
type crdCase struct {
	file     string
	plural   string
	singular string
	object   runtime.Object
}

var crdCases = []crdCase{
	{
		file:     "spire.spiffe.io_clusterspiffeids.yaml",
		plural:   "clusterspiffeids",
		singular: "clusterspiffeid",
		object:   &v1alpha1.ClusterSPIFFEID{},
	},
	{
		file:     "spire.spiffe.io_clusterstaticentries.yaml",
		plural:   "clusterstaticentries",
		singular: "clusterstaticentry",
		object:   &v1alpha1.ClusterStaticEntry{},
	},
	{
		file:     "spire.spiffe.io_clusterfederatedtrustdomains.yaml",
		plural:   "clusterfederatedtrustdomains",
		singular: "clusterfederatedtrustdomain",
		object:   &v1alpha1.ClusterFederatedTrustDomain{},
	},
}

// enumValues lists, for each Go string type whose schema carries an enum, every value of
// that type the package declares. A schema enum on any other type is an error.
var enumValues = map[reflect.Type][]string{
	reflect.TypeFor[v1alpha1.BundleEndpointProfileType](): {
		string(v1alpha1.HTTPSWebProfileType),
		string(v1alpha1.HTTPSSPIFFEProfileType),
	},
	reflect.TypeFor[metav1.ConditionStatus](): {
		string(metav1.ConditionTrue),
		string(metav1.ConditionFalse),
		string(metav1.ConditionUnknown),
	},
	reflect.TypeFor[metav1.LabelSelectorOperator](): {
		string(metav1.LabelSelectorOpIn),
		string(metav1.LabelSelectorOpNotIn),
		string(metav1.LabelSelectorOpExists),
		string(metav1.LabelSelectorOpDoesNotExist),
	},
}

var (
	durationType   = reflect.TypeFor[metav1.Duration]()
	timeType       = reflect.TypeFor[metav1.Time]()
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	marshalerType  = reflect.TypeFor[json.Marshaler]()
)

func loadCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(crdDir, file))
	if err != nil {
		t.Fatalf("reading CRD: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	// Strict: a misspelt key in the YAML would otherwise be dropped without a word.
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return crd
}

// TestCRDsCoverEveryKind checks that each top-level kind of the package has exactly one CRD
// case above, and that the kustomization lists exactly the CRD files of the directory.
func TestCRDsCoverEveryKind(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pkgPath := reflect.TypeFor[v1alpha1.ClusterSPIFFEID]().PkgPath()
	var kinds []string
	for kind, typ := range scheme.KnownTypes(v1alpha1.SchemeGroupVersion) {
		if typ.PkgPath() == pkgPath && !strings.HasSuffix(kind, "List") {
			kinds = append(kinds, kind)
		}
	}
	var covered []string
	for _, c := range crdCases {
		covered = append(covered, reflect.TypeOf(c.object).Elem().Name())
	}
	sort.Strings(kinds)
	sort.Strings(covered)
	if !slices.Equal(kinds, covered) {
		t.Errorf("kinds registered in the scheme %v, kinds with a CRD %v", kinds, covered)
	}

	data, err := os.ReadFile(filepath.Join(crdDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kustomization struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &kustomization); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" {
			want = append(want, base)
		}
	}
	got := slices.Clone(kustomization.Resources)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml lists %v, the directory holds %v", got, want)
	}
	var caseFiles []string
	for _, c := range crdCases {
		caseFiles = append(caseFiles, c.file)
	}
	sort.Strings(caseFiles)
	if !slices.Equal(caseFiles, want) {
		t.Errorf("CRD files tested %v, the directory holds %v", caseFiles, want)
	}
}

func TestCRDs(t *testing.T) {
	for _, c := range crdCases {
		t.Run(c.file, func(t *testing.T) {
			crd := loadCRD(t, c.file)
			kind := reflect.TypeOf(c.object).Elem().Name()
			checkNames(t, crd, c, kind)

			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("want exactly one version, got %d", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != v1alpha1.SchemeGroupVersion.Version || !v.Served || !v.Storage {
				t.Errorf("version %q served=%v storage=%v, want %q served and stored",
					v.Name, v.Served, v.Storage, v1alpha1.SchemeGroupVersion.Version)
			}
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("the status subresource is not enabled")
			}
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Fatalf("no openAPIV3Schema")
			}
			schema := v.Schema.OpenAPIV3Schema

			checkNoPreserveUnknownFields(t, "", schema)
			structural := checkStructural(t, schema)
			compareSchema(t, "", reflect.TypeOf(c.object).Elem(), schema)
			checkPrinterColumns(t, v.AdditionalPrinterColumns, schema)
			if structural != nil {
				checkNothingPruned(t, c.object, structural)
			}
		})
	}
}

func checkNames(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, c crdCase, kind string) {
	t.Helper()
	if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
		t.Errorf("apiVersion/kind %s/%s, want apiextensions.k8s.io/v1/CustomResourceDefinition",
			crd.APIVersion, crd.Kind)
	}
	if want := c.plural + "." + v1alpha1.GroupName; crd.Name != want {
		t.Errorf("metadata.name %q, want %q", crd.Name, want)
	}
	if crd.Spec.Group != v1alpha1.GroupName {
		t.Errorf("group %q, want %q", crd.Spec.Group, v1alpha1.GroupName)
	}
	want := apiextensionsv1.CustomResourceDefinitionNames{
		Plural:   c.plural,
		Singular: c.singular,
		Kind:     kind,
		ListKind: kind + "List",
	}
	if diff := cmp.Diff(want, crd.Spec.Names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("scope %q, want %q", crd.Spec.Scope, apiextensionsv1.ClusterScoped)
	}
	if crd.Spec.PreserveUnknownFields {
		t.Errorf("spec.preserveUnknownFields must be false")
	}
	// The list type the clientset decodes into must exist under the CRD's listKind.
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if !scheme.Recognizes(v1alpha1.SchemeGroupVersion.WithKind(crd.Spec.Names.ListKind)) {
		t.Errorf("listKind %q is not registered in the scheme", crd.Spec.Names.ListKind)
	}
}

// checkNoPreserveUnknownFields fails on x-kubernetes-preserve-unknown-fields anywhere: the
// schema must describe every field, so nothing needs to be kept unchecked.
func checkNoPreserveUnknownFields(t *testing.T, path string, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	if s == nil {
		return
	}
	if s.XPreserveUnknownFields != nil {
		t.Errorf("%s: x-kubernetes-preserve-unknown-fields is set", pathOrRoot(path))
	}
	for name, p := range s.Properties {
		checkNoPreserveUnknownFields(t, path+"."+name, &p)
	}
	if s.Items != nil {
		checkNoPreserveUnknownFields(t, path+"[]", s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		checkNoPreserveUnknownFields(t, path+"{}", s.AdditionalProperties.Schema)
	}
}

// checkStructural converts the schema the way the API server does and checks it is a valid
// structural schema, which the API server requires of every apiextensions.k8s.io/v1 CRD.
func checkStructural(t *testing.T, s *apiextensionsv1.JSONSchemaProps) *structuralschema.Structural {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		t.Errorf("converting the schema: %v", err)
		return nil
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Errorf("the schema is not structural: %v", err)
		return nil
	}
	if errs := structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), structural); len(errs) > 0 {
		t.Errorf("the schema is not structural: %v", errs.ToAggregate())
		return nil
	}
	return structural
}

// jsonField is one field of a struct as encoding/json sees it.
type jsonField struct {
	typ       reflect.Type
	omitempty bool
}

// jsonFields returns the JSON fields of struct type typ, with embedded structs inlined the
// way encoding/json inlines them.
func jsonFields(typ reflect.Type) map[string]jsonField {
	fields := map[string]jsonField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if name == "" && f.Anonymous {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, jf := range jsonFields(ft) {
					fields[n] = jf
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = jsonField{typ: ft, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	return fields
}

// compareSchema checks schema s against the JSON encoding of Go type typ, recursively, and
// reports every difference with its JSON path.
func compareSchema(t *testing.T, path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	p := pathOrRoot(path)
	if s == nil {
		t.Errorf("%s: no schema for Go type %v", p, typ)
		return
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	expectType := func(want string) bool {
		if s.Type != want {
			t.Errorf("%s: schema type %q, but Go type %v encodes as %q", p, s.Type, typ, want)
			return false
		}
		return true
	}
	noChildren := func() {
		if len(s.Properties) > 0 || s.Items != nil || s.AdditionalProperties != nil {
			t.Errorf("%s: schema has properties, items or additionalProperties that Go type %v cannot hold", p, typ)
		}
	}

	if len(s.Enum) > 0 {
		want, ok := enumValues[typ]
		if !ok {
			t.Errorf("%s: schema enum on Go type %v, which declares no enumeration", p, typ)
		} else {
			var got []string
			for _, e := range s.Enum {
				var v string
				if err := json.Unmarshal(e.Raw, &v); err != nil {
					t.Errorf("%s: enum value %s is not a string", p, e.Raw)
				}
				got = append(got, v)
			}
			if !slices.Equal(sorted(got), sorted(want)) {
				t.Errorf("%s: schema enum %v, Go declares %v", p, got, want)
			}
		}
	}

	switch typ {
	case durationType:
		// metav1.Duration marshals to a Go duration string such as "1h30m".
		expectType("string")
		noChildren()
		return
	case timeType:
		// metav1.Time marshals to an RFC 3339 string.
		expectType("string")
		if s.Format != "date-time" {
			t.Errorf("%s: metav1.Time wants format date-time, schema has %q", p, s.Format)
		}
		noChildren()
		return
	case objectMetaType:
		// The API server owns the schema of metadata; a CRD may only say it is an object.
		expectType("object")
		noChildren()
		return
	}
	if typ.Implements(marshalerType) || reflect.PointerTo(typ).Implements(marshalerType) {
		t.Errorf("%s: Go type %v has its own JSON encoding; teach compareSchema what it encodes as", p, typ)
		return
	}

	switch typ.Kind() {
	case reflect.String:
		expectType("string")
		noChildren()
	case reflect.Bool:
		expectType("boolean")
		noChildren()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		expectType("integer")
		noChildren()
	case reflect.Float32, reflect.Float64:
		expectType("number")
		noChildren()
	case reflect.Slice, reflect.Array:
		if typ.Elem().Kind() == reflect.Uint8 {
			// []byte encodes as a base64 string.
			expectType("string")
			noChildren()
			return
		}
		if !expectType("array") {
			return
		}
		if s.Items == nil || s.Items.Schema == nil {
			t.Errorf("%s: array schema without a single items schema", p)
			return
		}
		compareSchema(t, path+"[]", typ.Elem(), s.Items.Schema)
	case reflect.Map:
		if typ.Key().Kind() != reflect.String {
			t.Errorf("%s: Go map %v has non-string keys", p, typ)
			return
		}
		if !expectType("object") {
			return
		}
		if len(s.Properties) > 0 {
			t.Errorf("%s: schema of Go map %v has fixed properties", p, typ)
		}
		if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
			t.Errorf("%s: schema of Go map %v has no additionalProperties schema", p, typ)
			return
		}
		compareSchema(t, path+"{}", typ.Elem(), s.AdditionalProperties.Schema)
	case reflect.Struct:
		if !expectType("object") {
			return
		}
		if s.AdditionalProperties != nil {
			t.Errorf("%s: schema of Go struct %v has additionalProperties", p, typ)
		}
		fields := jsonFields(typ)
		for name, f := range fields {
			prop, ok := s.Properties[name]
			if !ok {
				t.Errorf("%s.%s: field of Go type %v is missing from the schema", path, name, typ)
				continue
			}
			compareSchema(t, path+"."+name, f.typ, &prop)
		}
		for name := range s.Properties {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s.%s: schema property is not a JSON field of Go type %v", path, name, typ)
			}
		}
		for _, name := range s.Required {
			f, ok := fields[name]
			switch {
			case !ok:
				t.Errorf("%s: required property %q is not a JSON field of Go type %v", p, name, typ)
			case f.omitempty:
				// A Go client would omit the zero value and have the object rejected.
				t.Errorf("%s.%s: required in the schema but omitempty in Go type %v", path, name, typ)
			}
		}
	default:
		t.Errorf("%s: Go type %v (kind %v) has no JSON schema rule", p, typ, typ.Kind())
	}
}

// checkPrinterColumns checks that every column's jsonPath names a schema property of the
// column's type.
func checkPrinterColumns(t *testing.T, columns []apiextensionsv1.CustomResourceColumnDefinition, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	if len(columns) == 0 {
		t.Errorf("no additionalPrinterColumns")
	}
	for _, col := range columns {
		if col.JSONPath == ".metadata.creationTimestamp" {
			if col.Type != "date" {
				t.Errorf("column %q: type %q, want date", col.Name, col.Type)
			}
			continue
		}
		if !strings.HasPrefix(col.JSONPath, ".") {
			t.Errorf("column %q: jsonPath %q does not start with a dot", col.Name, col.JSONPath)
			continue
		}
		prop := s
		for _, name := range strings.Split(strings.TrimPrefix(col.JSONPath, "."), ".") {
			next, ok := prop.Properties[name]
			if !ok {
				t.Errorf("column %q: jsonPath %q is not in the schema", col.Name, col.JSONPath)
				prop = nil
				break
			}
			prop = &next
		}
		if prop != nil && prop.Type != col.Type {
			t.Errorf("column %q: type %q, but %q is of type %q", col.Name, col.Type, col.JSONPath, prop.Type)
		}
	}
}

// checkNothingPruned encodes an object with every field set and checks that the API server's
// pruning, driven by the schema, removes nothing from it.
func checkNothingPruned(t *testing.T, object runtime.Object, s *structuralschema.Structural) {
	t.Helper()
	full := reflect.New(reflect.TypeOf(object).Elem())
	fill(full.Elem())
	data, err := json.Marshal(full.Interface())
	if err != nil {
		t.Fatal(err)
	}
	var encoded, pruned map[string]any
	if err := json.Unmarshal(data, &encoded); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &pruned); err != nil {
		t.Fatal(err)
	}
	removed := pruning.PruneWithOptions(pruned, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(removed) > 0 {
		t.Errorf("the API server would prune %v from %s", removed, data)
	} else if diff := cmp.Diff(encoded, pruned); diff != "" {
		t.Errorf("pruning changed the object (-before +after):\n%s", diff)
	}
}

// fill sets every field reachable from v to a non-zero value, so that encoding/json drops
// nothing for omitempty.
func fill(v reflect.Value) {
	switch v.Type() {
	case durationType:
		v.Set(reflect.ValueOf(metav1.Duration{Duration: 90 * time.Second}))
		return
	case objectMetaType:
		v.Set(reflect.ValueOf(metav1.ObjectMeta{Name: "example"}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		key := reflect.New(v.Type().Key()).Elem()
		fill(key)
		val := reflect.New(v.Type().Elem()).Elem()
		fill(val)
		v.SetMapIndex(key, val)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

func pathOrRoot(path string) string {
	if path == "" {
		return "<root>"
	}
	return path
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
