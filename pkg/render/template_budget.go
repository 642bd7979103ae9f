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
	"fmt"
	"io"
	"net/url"
	"reflect"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"
)

// What one template execution may allocate. The strings a template builds are the only values
// it can make larger than its own text and the pod's data, so they are charged, before they
// are built, against maxAllocatedBytes: printf, print, println, html, js and urlquery first
// bound the size of their result from their arguments, and refuse when the bound does not fit
// in what is left. The bound counts fmt's scratch buffer beside the result, and the argument
// list text/template allocates for the call. Each range iteration and template call is charged
// too, before its body runs, for what text/template allocates to walk the body (stepCost), so
// that a loop cannot allocate without limit either. A template that neither loops nor calls
// one is walked once, which its length bounds.
const (
	// maxAllocatedBytes bounds the bytes the functions of one execution allocate. Real
	// templates build a few short strings, under a kilobyte; one that needs a mebibyte is
	// building something no SPIFFE ID, DNS name or selector can hold.
	maxAllocatedBytes = 1 << 20
	// fmtOverhead is the factor fmt allocates beyond a result of n bytes: its scratch buffer
	// holds the n bytes before they are copied into the returned string.
	fmtOverhead = 2
	// argOverhead is what text/template allocates for each argument of a call: its
	// reflect.Value and the variadic []any slot, with the value boxed in it.
	argOverhead = 64
	// boundSlack covers fmt's fixed strings around one verb or argument: "%!v(MISSING)",
	// "%!(EXTRA ", "<nil>", ", " and the like, all shorter.
	boundSlack = 32
	// maxWidthDigits bounds the width and precision of a printf verb, so that a format such
	// as "%0999999999d" cannot ask for a gigabyte of padding.
	maxWidthDigits = 2
)

// The errors that stop an execution that loops, recurses or builds too much.
var (
	errIterationsExceeded = fmt.Errorf("more than %d range iterations", maxRangeIterations)
	errCallsExceeded      = fmt.Errorf("more than %d template calls", maxTemplateCalls)
	errTimeExceeded       = fmt.Errorf("execution took longer than %s", maxExecutionTime)
	errMemoryExceeded     = fmt.Errorf("functions would allocate more than %d bytes", maxAllocatedBytes)
	// errOutputTooLong is returned when a template or a function produces more than
	// maxRenderedBytes.
	errOutputTooLong = fmt.Errorf("output longer than %d bytes", maxRenderedBytes)
)

// budget is what one execution has spent.
type budget struct {
	iterations, calls int
	bytes             int
	deadline          time.Time
}

// newBudget is the budget of an execution that starts now.
func newBudget() *budget {
	return &budget{deadline: time.Now().Add(maxExecutionTime)}
}

// reset starts a new execution on b.
func (b *budget) reset() {
	*b = budget{deadline: time.Now().Add(maxExecutionTime)}
}

// funcs are the template functions bound to b: the step counters and the printing functions.
func (b *budget) funcs() template.FuncMap {
	return template.FuncMap{
		iterationFunc: b.iteration,
		callFunc:      b.call,
		"printf":      b.printf,
		"print":       b.print,
		"println":     b.println,
		"html":        b.html,
		"js":          b.js,
		"urlquery":    b.urlquery,
		printFunc:     b.printValue,
	}
}

// iteration counts a range iteration, whose walk text/template allocates cost bytes for.
func (b *budget) iteration(cost int) (string, error) {
	b.iterations++
	if b.iterations > maxRangeIterations {
		return "", errIterationsExceeded
	}
	if err := b.charge(cost); err != nil {
		return "", err
	}
	return "", b.checkTime(b.iterations)
}

// call counts a template call, whose walk text/template allocates cost bytes for.
func (b *budget) call(cost int) (string, error) {
	b.calls++
	if b.calls > maxTemplateCalls {
		return "", errCallsExceeded
	}
	if err := b.charge(cost); err != nil {
		return "", err
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

// charge spends n bytes, or fails when fewer are left.
func (b *budget) charge(n int) error {
	if n < 0 || n > maxAllocatedBytes-b.bytes {
		return errMemoryExceeded
	}
	b.bytes += n
	return nil
}

// left is what the execution may still allocate.
func (b *budget) left() int {
	return maxAllocatedBytes - b.bytes
}

// printf is fmt.Sprintf, refused before it runs when its result could exceed the budget.
func (b *budget) printf(format string, args ...any) (string, error) {
	n, err := printfBound(format, args, b.left())
	if err != nil {
		return "", err
	}
	if err := b.charge(fmtOverhead*n + argOverhead*(len(args)+1)); err != nil {
		return "", err
	}
	return checkLength(fmt.Sprintf(format, args...))
}

// print is fmt.Sprint within the budget.
func (b *budget) print(args ...any) (string, error) {
	if err := b.chargePrint(args); err != nil {
		return "", err
	}
	return checkLength(fmt.Sprint(args...))
}

// println is fmt.Sprintln within the budget.
func (b *budget) println(args ...any) (string, error) {
	if err := b.chargePrint(args); err != nil {
		return "", err
	}
	return checkLength(fmt.Sprintln(args...))
}

// chargePrint charges what fmt.Sprint or fmt.Sprintln of args may allocate: each argument as
// %v, a space between them and a final newline.
func (b *budget) chargePrint(args []any) error {
	n, err := printBound(args, b.left())
	if err != nil {
		return err
	}
	return b.charge(fmtOverhead*n + argOverhead*len(args))
}

// html is text/template's html within the budget.
func (b *budget) html(args ...any) (string, error) {
	s, err := b.escaperInput("html", args)
	if err != nil || !strings.ContainsAny(s, "'\"&<>\000") {
		return s, err
	}
	return b.escape(s, template.HTMLEscape)
}

// js is text/template's js within the budget.
func (b *budget) js(args ...any) (string, error) {
	s, err := b.escaperInput("js", args)
	if err != nil || strings.IndexFunc(s, jsIsSpecial) < 0 {
		return s, err
	}
	return b.escape(s, template.JSEscape)
}

// jsIsSpecial is the rune text/template's js escapes.
func jsIsSpecial(r rune) bool {
	switch r {
	case '\\', '\'', '"', '<', '>', '&', '=':
		return true
	}
	return r < ' ' || utf8.RuneSelf <= r
}

// urlquery is text/template's urlquery within the budget. url.QueryEscape allocates its
// result twice, once as bytes and once as a string, so its length is counted first.
func (b *budget) urlquery(args ...any) (string, error) {
	s, err := b.escaperInput("urlquery", args)
	if err != nil {
		return "", err
	}
	n := 0
	for i := range len(s) {
		n++
		if !isQueryUnescaped(s[i]) {
			n += 2
		}
	}
	if n > maxRenderedBytes {
		return "", errOutputTooLong
	}
	if err := b.charge(2 * n); err != nil {
		return "", err
	}
	return url.QueryEscape(s), nil
}

// isQueryUnescaped reports whether url.QueryEscape writes c as one byte: an unreserved
// character, or a space as "+".
func isQueryUnescaped(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~ ", c) >= 0
}

// escaperInput is the text html, js and urlquery escape: their only argument when it is a
// string, else the arguments printed as text/template prints them.
func (b *budget) escaperInput(name string, args []any) (string, error) {
	if len(args) == 1 {
		if s, ok := args[0].(string); ok {
			return s, nil
		}
	}
	printable := make([]any, len(args))
	for i, arg := range args {
		printable[i] = printableArg(arg)
	}
	if err := b.chargePrint(printable); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return fmt.Sprint(printable...), nil
}

// printableArg is an argument as text/template prints it: behind its pointers, and "<no
// value>" for nothing.
func printableArg(arg any) any {
	if arg == nil {
		return "<no value>"
	}
	v := reflect.ValueOf(arg)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if !v.CanInterface() {
		return arg
	}
	return v.Interface()
}

// escape runs an escaper over a copy of s into a buffer that holds one byte more than any
// rendered string, so that the escaped text never costs more than that, however much s grows.
func (b *budget) escape(s string, escaper func(w io.Writer, b []byte)) (string, error) {
	if err := b.charge(len(s) + 2*(maxRenderedBytes+1)); err != nil {
		return "", err
	}
	w := cappedWriter{buf: make([]byte, 0, maxRenderedBytes+1)}
	escaper(&w, []byte(s))
	if w.full {
		return "", errOutputTooLong
	}
	return string(w.buf), nil
}

// cappedWriter keeps what fits in its buffer's capacity and drops the rest.
type cappedWriter struct {
	buf  []byte
	full bool
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if len(p) > cap(w.buf)-len(w.buf) {
		w.full = true
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func checkLength(s string) (string, error) {
	if len(s) > maxRenderedBytes {
		return "", errOutputTooLong
	}
	return s, nil
}

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
