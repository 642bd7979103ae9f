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
	"net/url"
	"reflect"
	"text/template"
	"time"
)

// What rendering one entry may allocate, all its templates together. A template reads a view
// that is data only, so the engine allocates in three places only: walking the template
// (charged per range iteration and template call, stepCost), sorting a map's keys for range
// (charged before the range starts), and building strings in the output functions. Every
// output function follows one rule: before it builds anything it charges printBound of what
// it prints, a bound of what fmt, html, js or urlquery may write for those values under any
// verb, flag, width and precision, times what fmt allocates beside its result. A call is
// refused when the charge does not fit, so no call builds more than the budget, and the clock
// is read at every charge, so no call starts after the deadline.
const (
	// maxAllocatedBytes bounds what rendering one entry allocates. Real templates build a
	// few short strings, under a kilobyte.
	maxAllocatedBytes = 1 << 20
	// fmtOverhead is the factor fmt allocates beyond a result of n bytes: its scratch
	// buffer, grown by doubling, and the returned string.
	fmtOverhead = 3
	// argCost is what text/template allocates for each argument of a call, and what fmt
	// writes around a value it cannot format: "%!v(MISSING)", "%!(EXTRA ", "<nil>".
	argCost = 64
	// valueCost bounds what fmt writes for a value that is not a string, and around a
	// list, map or struct: %#b of an int64, %#v's type names, a map entry's separators and
	// the sorting of its keys. The view holds no float.
	valueCost = 80
	// stringCost bounds what fmt writes around a string: quotes, or a bad verb's
	// "%!d(string=" and ")".
	stringCost = 16
	// escapeFactor bounds what fmt's quoting and hexadecimal verbs, html, js and urlquery
	// write for each byte of a string: js writes "\u003C" for "<". print, and printf's %s,
	// %v and %d, write a string as it is.
	escapeFactor = 6
	// maxWidthDigits bounds the width and precision of a printf verb, so that a format such
	// as "%0999999999d" cannot ask for a gigabyte of padding.
	maxWidthDigits = 2
	// mapKeyCost is what a range allocates per map entry to sort its keys.
	mapKeyCost = 32
)

// The errors that stop a render that loops, recurses or builds too much.
var (
	errIterationsExceeded = fmt.Errorf("more than %d range iterations", maxRangeIterations)
	errCallsExceeded      = fmt.Errorf("more than %d template calls", maxTemplateCalls)
	errTimeExceeded       = fmt.Errorf("rendering took longer than %s", maxExecutionTime)
	errMemoryExceeded     = fmt.Errorf("templates would allocate more than %d bytes", maxAllocatedBytes)
	errOutputTooLong      = fmt.Errorf("output longer than %d bytes", maxRenderedBytes)
	errUnbound            = errors.New("template function called outside a render")
)

// budget is what rendering one entry has spent.
type budget struct {
	iterations, calls int
	bytes             int
	deadline          time.Time
	// exceeded is the limit that stopped a template, if any.
	exceeded error
}

// charge spends n bytes, or fails when fewer are left or the time is up.
func (b *budget) charge(n int) error {
	switch {
	case n < 0 || n > maxAllocatedBytes-b.bytes:
		b.exceeded = errMemoryExceeded
	case time.Now().After(b.deadline):
		b.exceeded = errTimeExceeded
	default:
		b.bytes += n
		return nil
	}
	return b.exceeded
}

// spent reports whether a limit of b stopped a template already.
func (b *budget) spent() bool {
	return b != nil && b.exceeded != nil
}

// boundBudget holds the budget a clone of a template spends, set for one execution.
type boundBudget struct{ b *budget }

// funcs are the template functions that spend the bound budget.
func (r *boundBudget) funcs() template.FuncMap {
	return template.FuncMap{
		iterationFunc: r.iteration,
		callFunc:      r.call,
		rangeFunc:     r.rangeOver,
		printFunc:     r.printValue,
		"printf":      r.printf,
		"print":       func(args ...any) (string, error) { return r.output(fmt.Sprint, args) },
		"println":     func(args ...any) (string, error) { return r.output(fmt.Sprintln, args) },
		"html":        func(args ...any) (string, error) { return r.escape(template.HTMLEscapeString, args) },
		"js":          func(args ...any) (string, error) { return r.escape(template.JSEscapeString, args) },
		"urlquery":    func(args ...any) (string, error) { return r.escape(url.QueryEscape, args) },
	}
}

// spend charges n bytes to the bound budget.
func (r *boundBudget) spend(n int) error {
	if r.b == nil {
		return errUnbound
	}
	return r.b.charge(n)
}

// iteration counts a range iteration, whose walk text/template allocates cost bytes for.
func (r *boundBudget) iteration(cost int) (string, error) {
	if r.b != nil {
		if r.b.iterations++; r.b.iterations > maxRangeIterations {
			r.b.exceeded = errIterationsExceeded
			return "", errIterationsExceeded
		}
	}
	return "", r.spend(cost)
}

// call counts a template call, whose walk text/template allocates cost bytes for.
func (r *boundBudget) call(cost int) (string, error) {
	if r.b != nil {
		if r.b.calls++; r.b.calls > maxTemplateCalls {
			r.b.exceeded = errCallsExceeded
			return "", errCallsExceeded
		}
	}
	return "", r.spend(cost)
}

// rangeOver charges what text/template allocates to range over value before the first
// iteration: a sorted copy of a map's keys. It refuses what range cannot iterate over, whose
// error message would print the value whole.
func (r *boundBudget) rangeOver(value any) (any, error) {
	if value == nil {
		return nil, nil
	}
	switch v := reflect.ValueOf(value); v.Kind() {
	case reflect.Map:
		return value, r.spend(argCost + mapKeyCost*v.Len())
	case reflect.Slice, reflect.Array, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return value, nil
	case reflect.Pointer:
		if v.IsNil() {
			return value, nil
		}
	}
	return nil, fmt.Errorf("range can't iterate over a value of type %T", value)
}

// charge spends what an output function may allocate to write values, plus fixed bytes of
// its own, under the one rule above: each value padded by pad, each byte of a string written
// as perByte bytes.
func (r *boundBudget) charge(fixed, pad, perByte int, values ...any) error {
	if r.b == nil {
		return errUnbound
	}
	n := fixed + argCost*len(values)
	for _, v := range values {
		n += printBound(reflect.ValueOf(v), pad, perByte, maxAllocatedBytes-n)
		if n > maxAllocatedBytes {
			return errMemoryExceeded
		}
	}
	return r.spend(fmtOverhead * n)
}

// output is print or println within the budget.
func (r *boundBudget) output(format func(...any) string, args []any) (string, error) {
	if err := r.charge(0, 0, 1, args...); err != nil {
		return "", err
	}
	return checkLength(format(args...))
}

// printValue prints an action's value as text/template does, within the budget.
func (r *boundBudget) printValue(value any) (string, error) {
	if s, ok := value.(string); ok {
		return checkLength(s)
	}
	if err := r.charge(0, 0, 1, value); err != nil {
		return "", err
	}
	return checkLength(fmt.Sprint(printableArg(value)))
}

// printableArg is a value as text/template prints the objects' values: what its pointers
// point to, "<no value>" for nothing, and "nil" for an unset object, as the String method of
// the Kubernetes types prints it.
func printableArg(value any) any {
	if value == nil {
		return "<no value>"
	}
	v := reflect.ValueOf(value)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct {
		return "nil"
	}
	return v.Interface()
}

// printf is fmt.Sprintf within the budget. Its verbs may print an argument several times
// ("%[1]s%[1]s") and pad each value they print by their width and precision.
func (r *boundBudget) printf(format string, args ...any) (string, error) {
	verbs, pad, indexed, expands, err := scanVerbs(format)
	if err != nil {
		return "", err
	}
	perByte := 1
	if expands {
		perByte = escapeFactor
	}
	repeats := 1
	if indexed {
		repeats = verbs + 1
	}
	fixed := len(format) + verbs*(argCost+pad)
	for range repeats {
		if err := r.charge(fixed, pad, perByte, args...); err != nil {
			return "", err
		}
		fixed = 0
	}
	return checkLength(fmt.Sprintf(format, args...))
}

// escape is html, js or urlquery within the budget: its argument, or its arguments printed,
// escaped.
func (r *boundBudget) escape(escaper func(string) string, args []any) (string, error) {
	s, ok := "", len(args) == 1
	if ok {
		s, ok = args[0].(string)
	}
	if len(s) > maxRenderedBytes {
		return "", errOutputTooLong // Escaping never shortens.
	}
	if !ok {
		printable := make([]any, len(args))
		for i, arg := range args {
			printable[i] = printableArg(arg)
		}
		var err error
		if s, err = r.output(fmt.Sprint, printable); err != nil {
			return "", err
		}
	}
	if err := r.charge(0, 0, escapeFactor, s); err != nil {
		return "", err
	}
	return checkLength(escaper(s))
}

// scanVerbs reads a printf format's verbs: how many, the widest padding a width and a
// precision may add to each value, whether one picks its argument by index, and whether one
// may write a string longer than it is (any verb but %s, %v and %d, or the # and + flags). It
// refuses a width or precision taken from an argument, or of more than maxWidthDigits digits.
func scanVerbs(format string) (verbs, pad int, indexed, expands bool, err error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		verbs++
		digits, value, verbPad := 0, 0, 0
	verb:
		for i++; i < len(format); i++ {
			switch c := format[i]; {
			case c == '0' && digits == 0 && value == 0 && verbPad == 0:
				// The zero flag.
			case '0' <= c && c <= '9':
				if digits++; digits > maxWidthDigits {
					return 0, 0, false, false, fmt.Errorf("printf width or precision in %q too large: more than %d digits", format, maxWidthDigits)
				}
				value = value*10 + int(c-'0')
				continue
			case c == '*':
				return 0, 0, false, false, errors.New("printf width or precision taken from an argument (*) is not allowed")
			case c == '[':
				indexed = true
			case c == '#' || c == '+':
				expands = true
			case c != '.' && c != ']' && c != '-' && c != ' ':
				expands = expands || (c != 's' && c != 'v' && c != 'd')
				break verb
			}
			verbPad, digits, value = verbPad+value, 0, 0
		}
		pad = max(pad, verbPad+value)
	}
	return verbs, pad, indexed, expands, nil
}

// printBound bounds what fmt, html, js or urlquery write for v, each value padded by pad and
// each byte of a string written as perByte bytes. It walks v until the bound passes limit.
func printBound(v reflect.Value, pad, perByte, limit int) int {
	if v.Kind() == reflect.String {
		return stringCost + pad + perByte*v.Len()
	}
	n := valueCost + pad
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			n += printBound(v.Elem(), pad, perByte, limit-n)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len() && n <= limit; i++ {
			n += printBound(v.Index(i), pad, perByte, limit-n)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next() && n <= limit; {
			n += printBound(it.Key(), pad, perByte, limit-n) + printBound(it.Value(), pad, perByte, limit-n)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField() && n <= limit; i++ {
			n += printBound(v.Field(i), pad, perByte, limit-n)
		}
	}
	return n
}

func checkLength(s string) (string, error) {
	if len(s) > maxRenderedBytes {
		return "", errOutputTooLong
	}
	return s, nil
}

// boundedWriter fails writes past maxRenderedBytes, which stops template execution early.
type boundedWriter struct {
	bytes.Buffer
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > maxRenderedBytes {
		return 0, errOutputTooLong
	}
	return w.Buffer.Write(p)
}
