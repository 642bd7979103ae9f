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
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
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
)

// iterationFunc and callFunc are the functions injected at the start of every range body and
// every template, so that each iteration and each call is counted. Their names cannot clash
// with builtins.
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

// templateFuncs replace the builtin printing functions with bounded ones and declare the step
// counter, whose per-execution binding execute installs.
var templateFuncs = template.FuncMap{
	"printf":      boundedPrintf,
	"print":       bounded(fmt.Sprint),
	"println":     bounded(fmt.Sprintln),
	"html":        bounded(template.HTMLEscaper),
	"js":          bounded(template.JSEscaper),
	"urlquery":    bounded(template.URLQueryEscaper),
	iterationFunc: func() (string, error) { return "", nil },
	callFunc:      func() (string, error) { return "", nil },
}

// iterationNode and callNode are the actions that call iterationFunc and callFunc, parsed once
// and shared by every template.
var iterationNode, callNode = actionNode(iterationFunc), actionNode(callFunc)

func actionNode(funcName string) parse.Node {
	t := template.Must(template.New(funcName).Funcs(templateFuncs).Parse("{{" + funcName + "}}"))
	return t.Root.Nodes[0]
}

// compiledTemplate is a parsed template and, when it only joins text and string fields, the
// plan that renders it without text/template.
type compiledTemplate struct {
	*template.Template
	plan fieldPlan
}

// parseTemplate parses a template as spire-controller-manager does, with no restriction on
// the language, and instruments it so that execute can bound its loops and calls.
func parseTemplate(name, text string) (*compiledTemplate, error) {
	t, err := template.New(name).Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	if !canRepeat(t) {
		// Without a loop or a call each node runs at most once, so the execution is bounded
		// by the template's own size and execute runs it as it is, with no budget to bind.
		return &compiledTemplate{Template: t, plan: planFor(t)}, nil
	}
	for _, associated := range t.Templates() {
		if associated.Tree == nil || associated.Root == nil {
			continue
		}
		instrument(associated.Root)
		associated.Root.Nodes = append([]parse.Node{callNode}, associated.Root.Nodes...)
	}
	return &compiledTemplate{Template: t}, nil
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
	return t.Tree != nil && t.Root != nil && len(t.Root.Nodes) > 0 && t.Root.Nodes[0] == callNode
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
			n.List.Nodes = append([]parse.Node{iterationNode}, n.List.Nodes...)
		}
	}
}

// The errors that stop an execution that loops or recurses too long.
var (
	errIterationsExceeded = fmt.Errorf("more than %d range iterations", maxRangeIterations)
	errCallsExceeded      = fmt.Errorf("more than %d template calls", maxTemplateCalls)
	errTimeExceeded       = fmt.Errorf("execution took longer than %s", maxExecutionTime)
)

// budget is what one execution has spent.
type budget struct {
	iterations, calls int
	deadline          time.Time
}

func (b *budget) iteration() (string, error) {
	b.iterations++
	if b.iterations > maxRangeIterations {
		return "", errIterationsExceeded
	}
	return "", b.checkTime(b.iterations)
}

func (b *budget) call() (string, error) {
	b.calls++
	if b.calls > maxTemplateCalls {
		return "", errCallsExceeded
	}
	return "", b.checkTime(b.calls)
}

// checkTime reads the clock every 64 steps only: it costs more than a step.
func (b *budget) checkTime(n int) error {
	if n%64 == 0 && time.Now().After(b.deadline) {
		return errTimeExceeded
	}
	return nil
}

// printfWidth finds the width and precision of printf verbs.
var printfWidth = regexp.MustCompile(`%[-+# 0]*(\*|\d*)(?:\.(\*|\d*))?`)

// boundedPrintf is fmt.Sprintf with widths and precisions of at most two digits, so that a
// format such as "%0999999999d" cannot allocate a gigabyte, and with a bounded result, so that
// a variable cannot be doubled until memory runs out.
func boundedPrintf(format string, args ...any) (string, error) {
	for _, m := range printfWidth.FindAllStringSubmatch(format, -1) {
		for _, n := range m[1:] {
			if n == "*" || len(n) > 2 {
				return "", fmt.Errorf("printf width or precision %q too large", m[0])
			}
		}
	}
	return checkLength(fmt.Sprintf(format, args...))
}

// bounded wraps a builtin printing function so that its result is bounded.
func bounded(f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) { return checkLength(f(args...)) }
}

func checkLength(s string) (string, error) {
	if len(s) > maxRenderedBytes {
		return "", errOutputTooLong
	}
	return s, nil
}

// errOutputTooLong is returned when a template produces more than maxRenderedBytes.
var errOutputTooLong = fmt.Errorf("output longer than %d bytes", maxRenderedBytes)

// boundedBuffer fails writes past maxRenderedBytes, which stops template execution early.
type boundedBuffer struct {
	bytes.Buffer
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRenderedBytes {
		return 0, errOutputTooLong
	}
	return b.Buffer.Write(p)
}

// execute renders t over data within the limits above.
func execute(t *compiledTemplate, data *templateData) (string, error) {
	if t.plan != nil {
		if out, ok := t.plan.render(data); ok {
			return out, nil
		}
	}
	// The counters of an instrumented template are bound per execution: a clone shares the
	// parsed trees and only copies the function table. Cloning costs as much as executing a
	// typical template, so templates that cannot repeat a node skip it.
	run := t.Template
	if instrumented(run) {
		b := &budget{deadline: time.Now().Add(maxExecutionTime)}
		var err error
		if run, err = t.Clone(); err != nil {
			return "", fmt.Errorf("rendering %s: %w", t.Name(), err)
		}
		run.Funcs(template.FuncMap{iterationFunc: b.iteration, callFunc: b.call})
	}
	var out boundedBuffer
	if err := run.Execute(&out, data); err != nil {
		for _, limit := range []error{errOutputTooLong, errIterationsExceeded, errCallsExceeded, errTimeExceeded} {
			if errors.Is(err, limit) {
				return "", fmt.Errorf("rendering %s: %w", t.Name(), limit)
			}
		}
		return "", fmt.Errorf("rendering %s: %w", t.Name(), err)
	}
	return out.String(), nil
}
