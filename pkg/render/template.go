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
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"text/template"
	"text/template/parse"
	"time"
)

// Templates accept everything spire-controller-manager accepts: the whole text/template
// language with its builtin functions, over a view of the pod and node that is data only (see
// template_view.go). Whoever can write a ClusterSPIFFEID must still not be able to stall or
// exhaust the controller, so rendering an entry is bounded by limits that no real template
// comes near: what each template may write, what all of an entry's templates may build, how
// many loop iterations and template calls they may make, and how long they may run.
const (
	// maxRenderedBytes bounds what one template may write, and every string its printing
	// functions build. A SPIFFE ID is at most 2048 bytes and every other rendered value is
	// far shorter.
	maxRenderedBytes = 2048
	// maxRangeIterations bounds the range iterations of one entry's templates. Real
	// templates range over a pod's labels or containers: tens of iterations.
	maxRangeIterations = 5000
	// maxTemplateCalls bounds the template calls of one entry's templates, and so the depth
	// of a recursion, whose stack is costly well before text/template's own depth limit.
	maxTemplateCalls = 1000
	// maxExecutionTime bounds the rendering of one entry; real templates take microseconds.
	maxExecutionTime = time.Second
	// maxTemplateBytes bounds the text of one template, and so the arguments of one call,
	// which text/template allocates before the function can refuse them, and the parse tree
	// kept for each template. Real templates are shorter than a SPIFFE ID.
	maxTemplateBytes = 16 << 10
)

// The functions injected into every template: iterationFunc at the start of every range body
// and callFunc at the start of every template count each iteration and call and charge what
// text/template allocates to walk the body once; rangeFunc charges what a range allocates
// before its first iteration; printFunc prints an action's value. Their names cannot clash
// with builtins.
const (
	iterationFunc = "_spireRegistrarIteration"
	callFunc      = "_spireRegistrarCall"
	rangeFunc     = "_spireRegistrarRange"
	printFunc     = "_spireRegistrarPrint"
)

// templateFuncs replace the builtin output functions with ones that charge a budget, and
// declare the injected ones, for parsing: execute binds them to the entry's budget.
var templateFuncs = (&boundBudget{}).funcs()

// outputFuncs are the functions whose result is a string within maxRenderedBytes.
var outputFuncs = map[string]bool{"printf": true, "print": true, "println": true, "html": true, "js": true, "urlquery": true, printFunc: true}

// stepAction is the action that calls iterationFunc or callFunc with the cost of one step.
func stepAction(funcName string, cost int) parse.Node {
	t := template.Must(template.New(funcName).Funcs(templateFuncs).Parse(fmt.Sprintf("{{ %s %d }}", funcName, cost)))
	return t.Root.Nodes[0]
}

// isCallAction reports whether node is the action parseTemplate puts at the start of every
// template of an instrumented one.
func isCallAction(node parse.Node) bool {
	action, ok := node.(*parse.ActionNode)
	if !ok || len(action.Pipe.Cmds) != 1 || len(action.Pipe.Cmds[0].Args) == 0 {
		return false
	}
	id, ok := action.Pipe.Cmds[0].Args[0].(*parse.IdentifierNode)
	return ok && id.Ident == callFunc
}

// What text/template allocates to walk a node, a generous bound of what it was measured to
// allocate: a command allocates its argument values and its result, and about 90 bytes go to
// the step's own counting call.
const (
	stepBaseCost   = 128
	nodeCost       = 32
	commandCost    = 320
	commandArgCost = 96
)

// stepCost is what one walk of node charges: every node below it, except the bodies of
// nested ranges, which charge their own iterations, and the templates it calls, which charge
// their own calls.
func stepCost(node parse.Node) int {
	cost := stepBaseCost
	var walk func(parse.Node)
	walk = func(node parse.Node) {
		if node == nil || reflect.ValueOf(node).IsNil() {
			return
		}
		cost += nodeCost
		switch n := node.(type) {
		case *parse.ListNode:
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.ElseList)
		case *parse.TemplateNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			cost += nodeCost * len(n.Decl)
			for _, c := range n.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			cost += commandCost + commandArgCost*len(n.Args)
			for _, c := range n.Args {
				walk(c)
			}
		case *parse.ChainNode:
			walk(n.Node)
		}
	}
	walk(node)
	return cost
}

// compiledTemplate is a parsed template and, when it only joins text and string fields, the
// plan that renders it without text/template.
type compiledTemplate struct {
	*template.Template
	plan fieldPlan
	// runs holds clones of the template whose functions spend the budget of the run's
	// boundBudget, so that an execution does not clone the template again.
	runs sync.Pool
}

// budgetedRun is a clone of a template whose functions spend the budget bound to it.
type budgetedRun struct {
	*template.Template
	bound *boundBudget
}

// parseTemplate parses a template as spire-controller-manager does, with no restriction on
// the language, and instruments it so that execute can bound what it does.
func parseTemplate(name, text string) (*compiledTemplate, error) {
	if len(text) > maxTemplateBytes {
		return nil, fmt.Errorf("parsing %s: the template is %d bytes, more than %d", name, len(text), maxTemplateBytes)
	}
	t, err := template.New(name).Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	plan := planFor(t)
	printThroughBudget(t)
	if !canRepeat(t) {
		// Without a loop or a call each node runs at most once, so the walk is bounded by
		// the template's own size.
		return &compiledTemplate{Template: t, plan: plan}, nil
	}
	for _, associated := range t.Templates() {
		if associated.Tree == nil || associated.Root == nil {
			continue
		}
		instrument(associated.Root)
		associated.Root.Nodes = append([]parse.Node{stepAction(callFunc, stepCost(associated.Root))}, associated.Root.Nodes...)
	}
	return &compiledTemplate{Template: t}, nil
}

// printCommand is the command that pipes an action's value into printFunc.
var printCommand = pipedCommand(printFunc)

// rangeCommand is the command that pipes a range's value into rangeFunc.
var rangeCommand = pipedCommand(rangeFunc)

func pipedCommand(name string) *parse.CommandNode {
	t := template.Must(template.New(name).Funcs(templateFuncs).Parse("{{ 0 | " + name + " }}"))
	return t.Root.Nodes[0].(*parse.ActionNode).Pipe.Cmds[1]
}

// printThroughBudget pipes the value of every action that prints one into printFunc, unless
// an output function made it: text/template would print it with fmt, unbounded.
func printThroughBudget(t *template.Template) {
	for _, associated := range t.Templates() {
		if associated.Tree == nil {
			continue
		}
		anyNode(associated.Root, func(n parse.Node) bool {
			action, ok := n.(*parse.ActionNode)
			if !ok || len(action.Pipe.Decl) > 0 {
				return false
			}
			last := action.Pipe.Cmds[len(action.Pipe.Cmds)-1]
			if id, ok := last.Args[0].(*parse.IdentifierNode); !ok || !outputFuncs[id.Ident] {
				action.Pipe.Cmds = append(action.Pipe.Cmds, printCommand)
			}
			return false
		})
	}
}

// anyNode reports whether f holds for node or any node below it.
func anyNode(node parse.Node, f func(parse.Node) bool) bool {
	if node == nil || reflect.ValueOf(node).IsNil() {
		return false
	}
	if f(node) {
		return true
	}
	switch n := node.(type) {
	case *parse.ListNode:
		return slices.ContainsFunc(n.Nodes, func(c parse.Node) bool { return anyNode(c, f) })
	case *parse.ActionNode:
		return anyNode(n.Pipe, f)
	case *parse.IfNode:
		return anyNode(n.Pipe, f) || anyNode(n.List, f) || anyNode(n.ElseList, f)
	case *parse.RangeNode:
		return anyNode(n.Pipe, f) || anyNode(n.List, f) || anyNode(n.ElseList, f)
	case *parse.WithNode:
		return anyNode(n.Pipe, f) || anyNode(n.List, f) || anyNode(n.ElseList, f)
	case *parse.TemplateNode:
		return anyNode(n.Pipe, f)
	case *parse.PipeNode:
		return slices.ContainsFunc(n.Cmds, func(c *parse.CommandNode) bool { return anyNode(c, f) })
	case *parse.CommandNode:
		return slices.ContainsFunc(n.Args, func(c parse.Node) bool { return anyNode(c, f) })
	case *parse.ChainNode:
		return anyNode(n.Node, f)
	}
	return false
}

// canRepeat reports whether any template associated with t has a range or a template call:
// the only actions that can run a node more than once.
func canRepeat(t *template.Template) bool {
	for _, associated := range t.Templates() {
		if associated.Tree != nil && repeats(associated.Root) {
			return true
		}
	}
	return false
}

func repeats(node parse.Node) bool {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		return slices.ContainsFunc(n.Nodes, repeats)
	case *parse.IfNode:
		return repeats(n.List) || repeats(n.ElseList)
	case *parse.WithNode:
		return repeats(n.List) || repeats(n.ElseList)
	case *parse.RangeNode, *parse.TemplateNode:
		return true
	}
	return false
}

// instrumented reports whether parseTemplate instrumented t, whose executions then need a
// budget.
func instrumented(t *template.Template) bool {
	return t.Tree != nil && t.Root != nil && len(t.Root.Nodes) > 0 && isCallAction(t.Root.Nodes[0])
}

// instrument counts a step at the start of every range body below node.
func instrument(node parse.Node) {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			instrument(c)
		}
	case *parse.IfNode:
		instrument(n.List)
		instrument(n.ElseList)
	case *parse.WithNode:
		instrument(n.List)
		instrument(n.ElseList)
	case *parse.RangeNode:
		instrument(n.List)
		instrument(n.ElseList)
		n.Pipe.Cmds = append(n.Pipe.Cmds, rangeCommand)
		if n.List != nil {
			n.List.Nodes = append([]parse.Node{stepAction(iterationFunc, stepCost(n.List))}, n.List.Nodes...)
		}
	}
}

// execute renders t over in within the entry's budget.
func execute(t *compiledTemplate, in *renderInput) (string, error) {
	if t.plan != nil {
		if out, ok := t.plan.render(in); ok {
			return out, nil
		}
	}
	// A clone shares the parsed trees and only copies the function table; clones are
	// reused, and bound to the entry's budget for one execution.
	r, _ := t.runs.Get().(*budgetedRun)
	if r == nil {
		clone, err := t.Clone()
		if err != nil {
			return "", fmt.Errorf("rendering %s: %w", t.Name(), err)
		}
		r = &budgetedRun{Template: clone, bound: &boundBudget{}}
		clone.Funcs(r.bound.funcs())
	}
	r.bound.b = in.spend()
	defer func() {
		r.bound.b = nil
		t.runs.Put(r)
	}()
	var out boundedWriter
	if err := r.Execute(&out, in.templateView()); err != nil {
		for _, limit := range []error{errOutputTooLong, errIterationsExceeded, errCallsExceeded, errTimeExceeded, errMemoryExceeded} {
			if errors.Is(err, limit) {
				return "", fmt.Errorf("rendering %s: %w", t.Name(), limit)
			}
		}
		return "", fmt.Errorf("rendering %s: %w", t.Name(), err)
	}
	return out.String(), nil
}
