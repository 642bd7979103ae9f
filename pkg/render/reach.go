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
	"reflect"
	"text/template"
	"text/template/parse"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// FieldSet is a set of top-level fields of a struct, by Go name, or all of them.
type FieldSet struct {
	All    bool
	Fields sets.Set[string]
}

func (s *FieldSet) add(field string) {
	if s.Fields == nil {
		s.Fields = sets.New[string]()
	}
	s.Fields.Insert(field)
}

// union makes s hold o's fields too, in a new set: a Reach may share its sets.
func (s *FieldSet) union(o FieldSet) {
	s.All = s.All || o.All
	if o.Fields.Len() > 0 {
		s.Fields = s.Fields.Union(o.Fields)
	}
}

// Reach is what templates can read of the pod and node they render with: the top-level fields
// of .PodMeta, .PodSpec, .NodeMeta and .NodeSpec. Whatever a template does with a field it
// reads, the whole field counts, so a template view holding only the fields of a Reach (see
// template_view.go) renders every such template exactly as one holding every field does.
type Reach struct {
	PodMeta, PodSpec, NodeMeta, NodeSpec FieldSet
}

// union adds o to r.
func (r *Reach) union(o Reach) {
	r.PodMeta.union(o.PodMeta)
	r.PodSpec.union(o.PodSpec)
	r.NodeMeta.union(o.NodeMeta)
	r.NodeSpec.union(o.NodeSpec)
}

func (c *ClusterSPIFFEID) templatesReach() Reach {
	var reach Reach
	reach.union(TemplateReach(c.spiffeID.Template))
	for _, t := range append(append([]*compiledTemplate{}, c.dnsNames...), c.workloadSelectors...) {
		reach.union(TemplateReach(t.Template))
	}
	return reach
}

// part is one of the objects templates see, as the abstract value of an expression.
type part int

const (
	// other is any value but the data or one of its objects: a field read of an object,
	// whose reach is recorded already, a constant, or a function's result.
	other part = iota
	// root is the template data itself, the dot a template starts with.
	root
	podMeta
	podSpec
	nodeMeta
	nodeSpec
)

// rootFields maps the fields of templateView that hold objects to their part.
var rootFields = map[string]part{"PodMeta": podMeta, "PodSpec": podSpec, "NodeMeta": nodeMeta, "NodeSpec": nodeSpec}

// partTypes are the struct types of the parts, whose fields a template can read.
var partTypes = map[part]reflect.Type{
	podMeta:  reflect.TypeFor[metav1.ObjectMeta](),
	podSpec:  reflect.TypeFor[corev1.PodSpec](),
	nodeMeta: reflect.TypeFor[metav1.ObjectMeta](),
	nodeSpec: reflect.TypeFor[corev1.NodeSpec](),
}

// TemplateReach is what a template, with the templates it defines, can read. It walks the
// parse trees and follows the data through the dot and variables. Whatever it cannot follow
// exactly counts as reading all of an object: an object printed or passed whole to a
// function (index, printf, len, a template call with an object, ...), ranged over, or
// assigned to a variable that held something else.
func TemplateReach(t *template.Template) Reach {
	w := &reachWalker{set: t, visited: map[calledTemplate]bool{}}
	w.walkTemplate(t.Name(), root)
	return w.reach
}

type calledTemplate struct {
	name string
	dot  part
}

type variable struct {
	name  string
	value part
}

type reachWalker struct {
	set     *template.Template
	reach   Reach
	visited map[calledTemplate]bool
	vars    []variable
}

func (w *reachWalker) fieldSet(p part) *FieldSet {
	switch p {
	case podMeta:
		return &w.reach.PodMeta
	case podSpec:
		return &w.reach.PodSpec
	case nodeMeta:
		return &w.reach.NodeMeta
	case nodeSpec:
		return &w.reach.NodeSpec
	}
	return nil
}

// escape counts the whole of a value that leaves what the walker follows.
func (w *reachWalker) escape(p part) {
	if p == root {
		for _, q := range rootFields {
			w.fieldSet(q).All = true
		}
		return
	}
	if s := w.fieldSet(p); s != nil {
		s.All = true
	}
}

// walkTemplate walks a template executed with dot as its data, once per template and data.
func (w *reachWalker) walkTemplate(name string, dot part) {
	key := calledTemplate{name, dot}
	if w.visited[key] {
		return
	}
	w.visited[key] = true
	t := w.set.Lookup(name)
	if t == nil || t.Tree == nil || t.Root == nil {
		return // Executing it fails, and renders nothing.
	}
	saved := w.vars
	w.vars = []variable{{"$", dot}}
	w.walk(t.Root, dot)
	w.vars = saved
}

func (w *reachWalker) walk(node parse.Node, dot part) {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			w.walk(c, dot)
		}
	case *parse.ActionNode:
		v := w.pipe(n.Pipe, dot)
		if len(n.Pipe.Decl) == 0 {
			w.escape(v) // Printed.
		}
	case *parse.IfNode:
		// An object is as nil or as non-nil in a view of some fields as in the whole one, so only
		// what the condition reads counts. Its variables end with the else branch.
		mark := len(w.vars)
		w.pipe(n.Pipe, dot)
		w.scoped(n.List, dot)
		w.scoped(n.ElseList, dot)
		w.vars = w.vars[:mark]
	case *parse.WithNode:
		mark := len(w.vars)
		v := w.pipe(n.Pipe, dot)
		w.scoped(n.List, v)
		w.scoped(n.ElseList, dot)
		w.vars = w.vars[:mark]
	case *parse.RangeNode:
		mark := len(w.vars)
		w.escape(w.pipe(n.Pipe, dot))
		// Elements are values read from a field, or integers.
		for i := range w.vars[mark:] {
			w.vars[mark+i].value = other
		}
		w.scoped(n.List, other)
		w.scoped(n.ElseList, dot)
		w.vars = w.vars[:mark]
	case *parse.TemplateNode:
		v := other
		if n.Pipe != nil {
			v = w.pipe(n.Pipe, dot)
		}
		w.walkTemplate(n.Name, v)
	}
}

// scoped walks a list whose variables end with it.
func (w *reachWalker) scoped(list *parse.ListNode, dot part) {
	mark := len(w.vars)
	w.walk(list, dot)
	w.vars = w.vars[:mark]
}

// pipe evaluates a pipeline, declares or assigns its variables, and returns its value.
func (w *reachWalker) pipe(p *parse.PipeNode, dot part) part {
	if p == nil {
		return other
	}
	v := other
	for i, cmd := range p.Cmds {
		if i > 0 {
			w.escape(v) // Passed as the last argument of the next command.
		}
		v = w.command(cmd, dot)
	}
	for _, d := range p.Decl {
		name := d.Ident[0]
		if !p.IsAssign {
			w.vars = append(w.vars, variable{name, v})
			continue
		}
		// An assignment in a loop or a branch leaves either value in the variable: count
		// both whole.
		for i := len(w.vars) - 1; i >= 0; i-- {
			if w.vars[i].name == name {
				w.escape(w.vars[i].value)
				w.escape(v)
				w.vars[i].value = other
				break
			}
		}
	}
	return v
}

// command evaluates one command of a pipeline.
func (w *reachWalker) command(cmd *parse.CommandNode, dot part) part {
	if len(cmd.Args) == 1 {
		return w.operand(cmd.Args[0], dot)
	}
	// A function or method call: its arguments are passed whole.
	first := w.operand(cmd.Args[0], dot)
	w.escape(first)
	for _, arg := range cmd.Args[1:] {
		w.escape(w.operand(arg, dot))
	}
	return other
}

// operand evaluates one argument.
func (w *reachWalker) operand(node parse.Node, dot part) part {
	switch n := node.(type) {
	case *parse.DotNode:
		return dot
	case *parse.FieldNode:
		return w.fields(dot, n.Ident)
	case *parse.VariableNode:
		return w.fields(w.lookup(n.Ident[0]), n.Ident[1:])
	case *parse.ChainNode:
		return w.fields(w.operand(n.Node, dot), n.Field)
	case *parse.PipeNode:
		return w.pipe(n, dot)
	}
	// Identifiers (functions, called with no argument), constants and nil.
	return other
}

func (w *reachWalker) lookup(name string) part {
	for i := len(w.vars) - 1; i >= 0; i-- {
		if w.vars[i].name == name {
			return w.vars[i].value
		}
	}
	return other
}

// fields follows a chain of field names from v, recording what it reads of the objects.
func (w *reachWalker) fields(v part, names []string) part {
	for _, name := range names {
		switch v {
		case other:
			return other
		case root:
			v = rootFields[name] // other for TrustDomain and the like
		default:
			// A name that is no field (a method, say) fails the template, which reads nothing:
			// the view templates read has no methods.
			if _, ok := partTypes[v].FieldByName(name); ok {
				w.fieldSet(v).add(name)
			}
			v = other
		}
	}
	return v
}
