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

package render

import (
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Templates read a view of the pod and node built for them, never the objects: a copy made of
// strings, numbers, booleans, and structs, maps, slices and pointers of those, whose types have
// no method at all. A template can read any field of the objects by its Go name, as in
// spire-controller-manager (.PodMeta.Name, .PodSpec.ServiceAccountName, .NodeMeta.UID), but it
// can call nothing but the template functions, and whatever it does, it cannot reach or change
// the informer cache: every map, slice and pointer of the view is new.
//
// Values whose Kubernetes types print through a method become the string that method prints:
// a time (metav1.Time) its time.Time text, a resource quantity its canonical text ("1Gi"), an
// int-or-string its number or string, managed fields their JSON.

// templateView is what a template executes over. Its names are spire-controller-manager's.
type templateView struct {
	TrustDomain   string
	ClusterName   string
	ClusterDomain string
	// PodMeta, PodSpec, NodeMeta and NodeSpec hold pointers to the plain forms of the
	// objects' ObjectMeta, PodSpec and NodeSpec: nil pointers of those types when a template
	// does not see the object (the parent ID template sees no pod).
	PodMeta, PodSpec, NodeMeta, NodeSpec any
}

// renderInput is what one entry renders from: the settings and the objects, whose view is
// built once, when a template first needs it, with only the fields reach says it can read.
type renderInput struct {
	trustDomain, clusterName, clusterDomain string
	pod                                     *corev1.Pod // nil for the parent ID template
	node                                    *corev1.Node
	reach                                   Reach
	budget                                  *budget
	view                                    *templateView
}

// spend is the budget the input's templates spend, whose time starts when it is first spent.
func (in *renderInput) spend() *budget {
	if in.budget == nil {
		in.budget = &budget{}
	}
	if in.budget.deadline.IsZero() {
		in.budget.deadline = time.Now().Add(maxExecutionTime)
	}
	return in.budget
}

// templateView returns the input's view, building it on first use.
func (in *renderInput) templateView() *templateView {
	if in.view != nil {
		return in.view
	}
	v := &templateView{TrustDomain: in.trustDomain, ClusterName: in.clusterName, ClusterDomain: in.clusterDomain,
		PodMeta: nilOf(objectMetaType), PodSpec: nilOf(podSpecType), NodeMeta: nilOf(objectMetaType), NodeSpec: nilOf(nodeSpecType)}
	if in.pod != nil {
		v.PodMeta = plainTop(&in.pod.ObjectMeta, in.reach.PodMeta)
		v.PodSpec = plainTop(&in.pod.Spec, in.reach.PodSpec)
	}
	if in.node != nil {
		v.NodeMeta = plainTop(&in.node.ObjectMeta, in.reach.NodeMeta)
		v.NodeSpec = plainTop(&in.node.Spec, in.reach.NodeSpec)
	}
	in.view = v
	return v
}

var (
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	podSpecType    = reflect.TypeFor[corev1.PodSpec]()
	nodeSpecType   = reflect.TypeFor[corev1.NodeSpec]()
)

// nilOf is a nil pointer to the plain form of t, which prints "<nil>" and fails a field read
// as the nil object pointer does in spire-controller-manager.
func nilOf(t reflect.Type) any {
	return reflect.Zero(reflect.PointerTo(plainTypeOf(t).typ)).Interface()
}

// plainTop is a pointer to the plain form of the struct obj points to, with only the fields of
// reach set.
func plainTop[T any](obj *T, reach FieldSet) any {
	src := reflect.ValueOf(obj).Elem()
	p := plainTypeOf(src.Type())
	dst := reflect.New(p.typ)
	if reach.All {
		for _, f := range p.fields {
			p.set(dst.Elem(), src, f)
		}
		return dst.Interface()
	}
	for name := range reach.Fields {
		if i, ok := p.byName[name]; ok {
			p.set(dst.Elem(), src, p.fields[i])
		}
	}
	return dst.Interface()
}

// textTypes are the Kubernetes types a template sees as the text their String method prints,
// which is what spire-controller-manager's templates print for them.
var textTypes = map[reflect.Type]func(v reflect.Value) string{
	reflect.TypeFor[metav1.Time]():      func(v reflect.Value) string { return v.Interface().(metav1.Time).Time.String() },
	reflect.TypeFor[metav1.MicroTime](): func(v reflect.Value) string { return v.Interface().(metav1.MicroTime).Time.String() },
	reflect.TypeFor[resource.Quantity](): func(v reflect.Value) string {
		// A copy: String may cache its text in the quantity.
		q := v.Interface().(resource.Quantity)
		q = q.DeepCopy()
		return q.String()
	},
	reflect.TypeFor[intstr.IntOrString](): func(v reflect.Value) string {
		s := v.Interface().(intstr.IntOrString)
		return s.String()
	},
	reflect.TypeFor[metav1.FieldsV1](): func(v reflect.Value) string {
		f := v.Interface().(metav1.FieldsV1)
		return f.GetRawString()
	},
}

// plainType is the plain form of a Kubernetes type, and how to copy a value into it.
type plainType struct {
	typ reflect.Type
	// text converts a value of a textTypes type.
	text func(v reflect.Value) string
	// elem and key are the plain forms of a pointer's, list's or map's elements and keys.
	elem, key *plainType
	// fields are the struct's fields the plain form keeps, byName their indexes.
	fields []plainField
	byName map[string]int
}

// plainField copies field src of a struct, of plain form typ, into field dst of the struct's
// plain form; promoted lists the fields an embedded struct promotes, copied from its plain
// form too.
type plainField struct {
	src, dst int
	typ      *plainType
	promoted [][2]int
}

// basicTypes are the unnamed types of each kind of scalar.
var basicTypes = map[reflect.Kind]reflect.Type{
	reflect.Bool: reflect.TypeFor[bool](), reflect.String: reflect.TypeFor[string](),
	reflect.Int: reflect.TypeFor[int](), reflect.Int8: reflect.TypeFor[int8](), reflect.Int16: reflect.TypeFor[int16](),
	reflect.Int32: reflect.TypeFor[int32](), reflect.Int64: reflect.TypeFor[int64](),
	reflect.Uint: reflect.TypeFor[uint](), reflect.Uint8: reflect.TypeFor[uint8](), reflect.Uint16: reflect.TypeFor[uint16](),
	reflect.Uint32: reflect.TypeFor[uint32](), reflect.Uint64: reflect.TypeFor[uint64](),
	reflect.Float32: reflect.TypeFor[float32](), reflect.Float64: reflect.TypeFor[float64](),
}

var plainTypes sync.Map // reflect.Type → *plainType

// The plain types most fields have, which plain copies without reflection.
var (
	stringType      = reflect.TypeFor[string]()
	stringMapType   = reflect.TypeFor[map[string]string]()
	stringSliceType = reflect.TypeFor[[]string]()
)

// plainTypeOf returns the plain form of t; nil for a type a template cannot see (functions,
// channels, interfaces).
func plainTypeOf(t reflect.Type) *plainType {
	if p, ok := plainTypes.Load(t); ok {
		return p.(*plainType)
	}
	p := buildPlainType(t)
	if p != nil {
		plainTypes.Store(t, p)
	}
	return p
}

func buildPlainType(t reflect.Type) *plainType {
	if text, ok := textTypes[t]; ok {
		return &plainType{typ: basicTypes[reflect.String], text: text}
	}
	if basic, ok := basicTypes[t.Kind()]; ok {
		return &plainType{typ: basic}
	}
	switch t.Kind() {
	case reflect.Pointer:
		if e := plainTypeOf(t.Elem()); e != nil {
			return &plainType{typ: reflect.PointerTo(e.typ), elem: e}
		}
	case reflect.Slice:
		if e := plainTypeOf(t.Elem()); e != nil {
			return &plainType{typ: reflect.SliceOf(e.typ), elem: e}
		}
	case reflect.Array:
		if e := plainTypeOf(t.Elem()); e != nil {
			return &plainType{typ: reflect.ArrayOf(t.Len(), e.typ), elem: e}
		}
	case reflect.Map:
		k, e := plainTypeOf(t.Key()), plainTypeOf(t.Elem())
		if k != nil && e != nil {
			return &plainType{typ: reflect.MapOf(k.typ, e.typ), key: k, elem: e}
		}
	case reflect.Struct:
		return buildPlainStruct(t)
	}
	return nil
}

// buildPlainStruct keeps a struct's exported fields under their names. An embedded struct is
// a field named after its type, whose fields are promoted as Go promotes them: a name the
// struct or another embedded struct already has is not.
func buildPlainStruct(t reflect.Type) *plainType {
	p := &plainType{byName: map[string]int{}}
	var fields []reflect.StructField
	names := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		ft := plainTypeOf(f.Type)
		if !f.IsExported() || ft == nil {
			continue
		}
		names[f.Name] = len(fields)
		p.byName[f.Name] = len(p.fields)
		p.fields = append(p.fields, plainField{src: i, dst: len(fields), typ: ft})
		fields = append(fields, reflect.StructField{Name: f.Name, Type: ft.typ})
	}
	taken := map[string]int{}
	for _, pf := range p.fields {
		f := t.Field(pf.src)
		if !f.Anonymous || fields[pf.dst].Type.Kind() != reflect.Struct {
			continue
		}
		for j := range fields[pf.dst].Type.NumField() {
			taken[fields[pf.dst].Type.Field(j).Name]++
		}
	}
	for i, pf := range p.fields {
		f := t.Field(pf.src)
		if !f.Anonymous || fields[pf.dst].Type.Kind() != reflect.Struct {
			continue
		}
		embedded := fields[pf.dst].Type
		for j := range embedded.NumField() {
			name := embedded.Field(j).Name
			if _, own := names[name]; own || taken[name] > 1 {
				continue
			}
			p.fields[i].promoted = append(p.fields[i].promoted, [2]int{j, len(fields)})
			fields = append(fields, reflect.StructField{Name: name, Type: embedded.Field(j).Type})
		}
	}
	p.typ = reflect.StructOf(fields)
	return p
}

// set copies field f of src into dst, the struct's plain form, whose fields start zero.
func (p *plainType) set(dst, src reflect.Value, f plainField) {
	v := src.Field(f.src)
	if f.typ.text == nil && f.promoted == nil && isEmpty(v) {
		return
	}
	pv := f.typ.plain(v)
	dst.Field(f.dst).Set(pv)
	for _, pr := range f.promoted {
		dst.Field(pr[1]).Set(pv.Field(pr[0]))
	}
}

// isEmpty reports whether v is a nil pointer, list or map, or a zero scalar: a value whose
// plain form is its plain type's zero.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Struct, reflect.Array:
		return false
	}
	return v.IsZero()
}

// plain copies v, of the Kubernetes type p is the plain form of, into its plain form.
func (p *plainType) plain(v reflect.Value) reflect.Value {
	switch v.Type() {
	case stringType:
		return v // Immutable.
	case stringMapType:
		return reflect.ValueOf(maps.Clone(v.Interface().(map[string]string)))
	case stringSliceType:
		return reflect.ValueOf(slices.Clone(v.Interface().([]string)))
	}
	if p.text != nil {
		return reflect.ValueOf(p.text(v))
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return reflect.Zero(p.typ)
		}
		out := reflect.New(p.typ.Elem())
		out.Elem().Set(p.elem.plain(v.Elem()))
		return out
	case reflect.Slice:
		if v.IsNil() {
			return reflect.Zero(p.typ)
		}
		out := reflect.MakeSlice(p.typ, v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(p.elem.plain(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(p.typ).Elem()
		for i := range v.Len() {
			out.Index(i).Set(p.elem.plain(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return reflect.Zero(p.typ)
		}
		out := reflect.MakeMapWithSize(p.typ, v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(p.key.plain(it.Key()), p.elem.plain(it.Value()))
		}
		return out
	case reflect.Struct:
		out := reflect.New(p.typ).Elem()
		for _, f := range p.fields {
			p.set(out, v, f)
		}
		return out
	}
	return v.Convert(p.typ)
}
