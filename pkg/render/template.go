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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Templates accept everything spire-controller-manager accepts: the whole text/template
// language with its builtin functions. Whoever can write a ClusterSPIFFEID must still not be
// able to stall or exhaust the controller, so one execution is bounded by limits that no real
// template comes near: what it may write and build, how many loop iterations and template
// calls it may make, and how long it may run.
const (
	// maxRenderedBytes bounds what one template may write, and every string its printing
	// functions build. A SPIFFE ID is at most 2048 bytes and every other rendered value is
	// far shorter.
	maxRenderedBytes = 2048
	// maxRangeIterations bounds the range iterations of one execution. Real templates range
	// over a pod's labels or containers: tens of iterations.
	maxRangeIterations = 5000
	// maxTemplateCalls bounds the template calls of one execution, and so the depth of a
	// recursion, whose stack is costly well before text/template's own depth limit.
	maxTemplateCalls = 1000
	// maxExecutionTime bounds one execution; real templates take microseconds.
	maxExecutionTime = time.Second
	// maxTemplateBytes bounds the text of one template, and so the arguments of one call,
	// which text/template allocates before the function can refuse them, and the parse tree
	// kept for each template. Real templates are shorter than a SPIFFE ID.
	maxTemplateBytes = 16 << 10
)

// iterationFunc and callFunc are the functions injected at the start of every range body and
// every template, so that each iteration and each call is counted, and charged what
// text/template allocates to walk the body once. Their names cannot clash with builtins.
const (
	iterationFunc = "_spireRegistrarIteration"
	callFunc      = "_spireRegistrarCall"
)

// templateData is what ClusterSPIFFEID templates and parentIDTemplate can refer to. The names
// are spire-controller-manager's, so existing templates render the same.
type templateData struct {
	TrustDomain   string
	ClusterName   string
	ClusterDomain string
	PodMeta       *metav1.ObjectMeta
	PodSpec       *corev1.PodSpec
	NodeMeta      *metav1.ObjectMeta
	NodeSpec      *corev1.NodeSpec
}

// templateFuncs replace the builtin printing functions with ones that charge a budget, and
// declare the step counters. execute binds them to one budget per execution; these unbound
// ones, which no execution calls, each spend a budget of their own.
var templateFuncs = template.FuncMap{
	"printf":      func(format string, args ...any) (string, error) { return newBudget().printf(format, args...) },
	"print":       func(args ...any) (string, error) { return newBudget().print(args...) },
	"println":     func(args ...any) (string, error) { return newBudget().println(args...) },
	"html":        func(args ...any) (string, error) { return newBudget().html(args...) },
	"js":          func(args ...any) (string, error) { return newBudget().js(args...) },
	"urlquery":    func(args ...any) (string, error) { return newBudget().urlquery(args...) },
	printFunc:     func(value any) (string, error) { return newBudget().printValue(value) },
	iterationFunc: func(int) (string, error) { return "", nil },
	callFunc:      func(int) (string, error) { return "", nil },
}

// budgetedFuncs are the functions that spend the budget: a template that calls none of them
// and cannot repeat a node runs without one.
var budgetedFuncs = map[string]bool{"printf": true, "print": true, "println": true, "html": true, "js": true, "urlquery": true, printFunc: true}

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
	// budgeted is set when an execution needs a budget of its own: the template loops,
	// calls a template or calls a function that spends the budget.
	budgeted bool
	// runs holds clones of the template bound to a budget each, so that an execution does
	// not clone the template again.
	runs sync.Pool
}

// budgetedRun is a clone of a template whose functions spend one budget.
type budgetedRun struct {
	*template.Template
	budget *budget
}

// parseTemplate parses a template as spire-controller-manager does, with no restriction on
// the language, and instruments it so that execute can bound its loops and calls.
func parseTemplate(name, text string) (*compiledTemplate, error) {
	if len(text) > maxTemplateBytes {
		return nil, fmt.Errorf("parsing %s: the template is %d bytes, more than %d", name, len(text), maxTemplateBytes)
	}
	t, err := template.New(name).Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	piped, err := guardValues(t)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	if !canRepeat(t) {
		// Without a loop or a call each node runs at most once, so the execution is bounded
		// by the template's own size and the strings its functions build; without such a
		// function execute runs it as it is, with no budget to bind.
		return &compiledTemplate{Template: t, plan: planFor(t), budgeted: piped || callsBudgetedFunc(t)}, nil
	}
	for _, associated := range t.Templates() {
		if associated.Tree == nil || associated.Root == nil {
			continue
		}
		instrument(associated.Root)
		associated.Root.Nodes = append([]parse.Node{stepAction(callFunc, stepCost(associated.Root))}, associated.Root.Nodes...)
	}
	return &compiledTemplate{Template: t, budgeted: true}, nil
}

// callsBudgetedFunc reports whether any template associated with t calls a function that
// spends the budget.
func callsBudgetedFunc(t *template.Template) bool {
	for _, associated := range t.Templates() {
		if associated.Tree != nil && anyNode(associated.Root, isBudgetedCall) {
			return true
		}
	}
	return false
}

func isBudgetedCall(node parse.Node) bool {
	id, ok := node.(*parse.IdentifierNode)
	return ok && budgetedFuncs[id.Ident]
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
		if n.List != nil {
			n.List.Nodes = append([]parse.Node{stepAction(iterationFunc, stepCost(n.List))}, n.List.Nodes...)
		}
	}
}

// execute renders t over data within the limits above.
func execute(t *compiledTemplate, data *templateData) (string, error) {
	if t.plan != nil {
		if out, ok := t.plan.render(data); ok {
			return out, nil
		}
	}
	// The budget is bound per execution: a clone shares the parsed trees and only copies the
	// function table, and clones are reused. Templates that need no budget skip it.
	run := t.Template
	if t.budgeted {
		r, _ := t.runs.Get().(*budgetedRun)
		if r == nil {
			clone, err := t.Clone()
			if err != nil {
				return "", fmt.Errorf("rendering %s: %w", t.Name(), err)
			}
			r = &budgetedRun{Template: clone, budget: newBudget()}
			clone.Funcs(r.budget.funcs())
		}
		r.budget.reset()
		defer t.runs.Put(r)
		run = r.Template
	}
	var out boundedBuffer
	if err := run.Execute(&out, data); err != nil {
		for _, limit := range []error{errOutputTooLong, errIterationsExceeded, errCallsExceeded, errTimeExceeded, errMemoryExceeded} {
			if errors.Is(err, limit) {
				return "", fmt.Errorf("rendering %s: %w", t.Name(), limit)
			}
		}
		return "", fmt.Errorf("rendering %s: %w", t.Name(), err)
	}
	return out.String(), nil
}
