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
	"fmt"
	"reflect"
	"text/template"
	"text/template/parse"
)

// Besides the functions, text/template builds strings from the data in two places a budget
// cannot reach: when an action prints a value, it formats all of it with fmt before the output
// is bounded; and when a template names a method of the data, it calls it. The Kubernetes types
// of a pod have methods that copy or print all of it (String builds a map's text by repeated
// concatenation, so a pod with thousands of labels costs gigabytes) or overwrite it
// (Unmarshal). So an action whose value may not be a string or a number prints it through
// printFunc, which the budget bounds, and the methods below are refused when a template is
// parsed: no field of the data has their names.

// printFunc prints the value of an action, as text/template would, within the budget.
const printFunc = "_spireRegistrarPrint"

// refusedMethods are the methods of the data whose cost or effect grows with the data.
var refusedMethods = map[string]bool{
	"String": true, "GoString": true, "DeepCopy": true, "DeepCopyObject": true,
	"Marshal": true, "MarshalTo": true, "MarshalToSizedBuffer": true, "MarshalJSON": true, "MarshalText": true,
	"MarshalCBOR": true, "MarshalQueryParameter": true, "ToUnstructured": true,
	"Unmarshal": true, "UnmarshalJSON": true, "UnmarshalText": true, "UnmarshalCBOR": true, "UnmarshalQueryParameter": true,
	"XXX_Marshal": true, "XXX_Unmarshal": true,
}

// printCommand is the command that pipes an action's value into printFunc.
var printCommand = func() *parse.CommandNode {
	t := template.Must(template.New(printFunc).Funcs(templateFuncs).Parse("{{ 0 | " + printFunc + " }}"))
	return t.Root.Nodes[0].(*parse.ActionNode).Pipe.Cmds[1]
}()

// scalarFields are the names of the fields of the data that hold a string, a number, a
// boolean or a pointer to one wherever they appear, and that no type of the data has a method
// without arguments of: an action that ends in one prints a short value without any method.
var scalarFields = func() map[string]bool {
	names := map[string]bool{}
	methods := map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		for _, mt := range []reflect.Type{t, reflect.PointerTo(t)} {
			for i := range mt.NumMethod() {
				// A method that takes arguments cannot end an action alone.
				if m := mt.Method(i); m.Type.NumIn() == 1 {
					methods[m.Name] = true
				}
			}
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				scalar := isScalarKind(ft.Kind()) && !hasFmtMethods(ft)
				if ok, known := names[f.Name]; !known || ok {
					names[f.Name] = scalar
				}
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[templateData]())
	for name := range methods {
		names[name] = false
	}
	return names
}()

// guardValues refuses the methods above in every template associated with t, and pipes every
// action whose value may need a method or a walk of the data to print into printFunc. It
// reports whether it piped one.
func guardValues(t *template.Template) (piped bool, err error) {
	for _, associated := range t.Templates() {
		if associated.Tree == nil {
			continue
		}
		if anyNode(associated.Root, func(n parse.Node) bool {
			if name := refusedIdentifier(n); name != "" {
				err = fmt.Errorf("%s: calling the method %s of the data is not allowed: its cost grows with the data", associated.ParseName, name)
				return true
			}
			if action, ok := n.(*parse.ActionNode); ok && len(action.Pipe.Decl) == 0 && !printsScalar(action.Pipe) {
				action.Pipe.Cmds = append(action.Pipe.Cmds, printCommand)
				piped = true
			}
			return false
		}); err != nil {
			return false, err
		}
	}
	return piped, nil
}

// refusedIdentifier is the refused method a field, chain or variable node names, if any.
func refusedIdentifier(n parse.Node) string {
	var idents []string
	switch n := n.(type) {
	case *parse.FieldNode:
		idents = n.Ident
	case *parse.ChainNode:
		idents = n.Field
	case *parse.VariableNode:
		idents = n.Ident[1:]
	}
	for _, id := range idents {
		if refusedMethods[id] {
			return id
		}
	}
	return ""
}

// printsScalar reports whether a pipeline's value is known to be a string, a number or a
// boolean: a literal, a budgeted function's result, a comparison, a length, a label or
// annotation, or a field that holds one wherever it appears.
func printsScalar(pipe *parse.PipeNode) bool {
	cmd := pipe.Cmds[len(pipe.Cmds)-1]
	switch n := cmd.Args[0].(type) {
	case *parse.StringNode, *parse.NumberNode, *parse.BoolNode:
		return len(cmd.Args) == 1
	case *parse.IdentifierNode:
		switch n.Ident {
		case "len", "eq", "ne", "lt", "le", "gt", "ge", "not", printFunc:
			return true
		case "index":
			// index .PodMeta.Labels "key" is the most common action after a plain field.
			return len(cmd.Args) == 3 && isStringMap(cmd.Args[1])
		}
		return budgetedFuncs[n.Ident]
	case *parse.FieldNode:
		return len(cmd.Args) == 1 && scalarFields[n.Ident[len(n.Ident)-1]]
	case *parse.VariableNode:
		return len(cmd.Args) == 1 && len(n.Ident) > 1 && scalarFields[n.Ident[len(n.Ident)-1]]
	}
	return false
}

// isStringMap reports whether node names the labels or annotations of the pod or the node.
func isStringMap(node parse.Node) bool {
	var idents []string
	switch n := node.(type) {
	case *parse.FieldNode:
		idents = n.Ident
	case *parse.VariableNode:
		if len(n.Ident) < 2 || n.Ident[0] != "$" {
			return false
		}
		idents = n.Ident[1:]
	default:
		return false
	}
	if len(idents) != 2 || (idents[0] != "PodMeta" && idents[0] != "NodeMeta") {
		return false
	}
	return idents[1] == "Labels" || idents[1] == "Annotations"
}

// printValue prints the value of an action as text/template prints it, within the budget.
func (b *budget) printValue(value any) (string, error) {
	if s, ok := value.(string); ok {
		return s, nil
	}
	return b.print(printableArg(value))
}
