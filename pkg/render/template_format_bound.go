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
	"unicode/utf8"
)

// The bounds below are upper bounds on what fmt writes, computed from the format and the
// arguments alone, so that a template function can refuse a result before fmt builds it.
// printfBound reads a format as fmt's doPrintf does, verb by verb and with the same argument
// indexes, so that each verb is charged for the argument it formats. Values whose type has a
// method fmt would call (String, Error, Format, GoString) are refused: nothing bounds what such
// a method builds, and a pod's metadata has one that builds a copy of all its labels.

// printfBound bounds the length of fmt.Sprintf(format, args...). It refuses a width or a
// precision taken from an argument or longer than maxWidthDigits, and fails with
// errMemoryExceeded as soon as the bound passes limit.
func printfBound(format string, args []any, limit int) (int, error) {
	n, end := 0, len(format)
	argNum, afterIndex, reordered := 0, false, false
	// argNumber reads an explicit argument index "[n]" at i, as fmt's argNumber does.
	argNumber := func(i int, good *bool) int {
		if i >= end || format[i] != '[' {
			afterIndex = false
			return i
		}
		reordered = true
		index, width, ok := parseArgNumber(format[i:])
		afterIndex = ok
		if ok && index >= 0 && index < len(args) {
			argNum = index
		} else {
			*good = false
		}
		return i + width
	}
	// number reads the digits of a width or a precision at i.
	number := func(i int) (value int, present bool, next int, err error) {
		if i < end && format[i] == '*' {
			return 0, false, i, errors.New("printf width or precision taken from an argument (*) is not allowed")
		}
		next = i
		for next < end && '0' <= format[next] && format[next] <= '9' {
			value = value*10 + int(format[next]-'0')
			next++
		}
		if next-i > maxWidthDigits {
			return 0, false, next, fmt.Errorf("printf width or precision %q too large", format[i:next])
		}
		return value, next > i, next, nil
	}
	for i := 0; i < end; {
		lasti := i
		for i < end && format[i] != '%' {
			i++
		}
		n += i - lasti
		if i >= end {
			break
		}
		i++
		good, fast := true, false
	flags:
		for ; i < end; i++ {
			switch c := format[i]; c {
			case '#', '0', '+', '-', ' ':
			default:
				// fmt's fast path: flags and a lower-case verb format the next argument.
				fast = 'a' <= c && c <= 'z' && argNum < len(args)
				break flags
			}
		}
		if fast {
			m, err := argBound(args[argNum], rune(format[i]), -1, 0, limit-n)
			if err != nil {
				return 0, err
			}
			n += m
			argNum++
			i++
			if n > limit {
				return 0, errMemoryExceeded
			}
			continue
		}
		i = argNumber(i, &good)
		width, widthPresent, next, err := number(i)
		if err != nil {
			return 0, err
		}
		i = next
		if afterIndex && widthPresent {
			good = false
		}
		prec := -1
		if i+1 < end && format[i] == '.' {
			i++
			if afterIndex {
				good = false
			}
			i = argNumber(i, &good)
			if prec, _, i, err = number(i); err != nil {
				return 0, err
			}
		}
		if !afterIndex {
			i = argNumber(i, &good)
		}
		if i >= end {
			n += boundSlack
			break
		}
		verb, size := utf8.DecodeRuneInString(format[i:])
		i += size
		switch {
		case verb == '%':
			n++
		case !good || argNum >= len(args):
			n += boundSlack + size
		default:
			m, err := argBound(args[argNum], verb, prec, width, limit-n)
			if err != nil {
				return 0, err
			}
			n += m
			argNum++
		}
		if n > limit {
			return 0, errMemoryExceeded
		}
	}
	if !reordered && argNum < len(args) {
		// fmt lists the arguments no verb formatted: "%!(EXTRA type=value, ...)".
		for _, arg := range args[argNum:] {
			m, err := argBound(arg, 'v', -1, 0, limit-n)
			if err != nil {
				return 0, err
			}
			n += m + boundSlack
			if arg != nil {
				n += len(reflect.TypeOf(arg).String())
			}
			if n > limit {
				return 0, errMemoryExceeded
			}
		}
	}
	return n, nil
}

// parseArgNumber is fmt's: the index in an argument index "[n]" at the start of format, the
// bytes it takes, and whether it is one.
func parseArgNumber(format string) (index int, width int, ok bool) {
	if len(format) < 3 {
		return 0, 1, false
	}
	for i := 1; i < len(format); i++ {
		if format[i] == ']' {
			num, isNum, next := 0, false, 1
			for ; next < i && '0' <= format[next] && format[next] <= '9'; next++ {
				if num > 1e6 {
					return 0, i + 1, false
				}
				num = num*10 + int(format[next]-'0')
				isNum = true
			}
			if !isNum || next != i {
				return 0, i + 1, false
			}
			return num - 1, i + 1, true
		}
	}
	return 0, 1, false
}

// printBound bounds the length of fmt.Sprint(args...) and fmt.Sprintln(args...): each
// argument as %v, a separator between them and a final newline.
func printBound(args []any, limit int) (int, error) {
	n := 1
	for _, arg := range args {
		m, err := argBound(arg, 'v', -1, 0, limit-n)
		if err != nil {
			return 0, err
		}
		if n += m + 1; n > limit {
			return 0, errMemoryExceeded
		}
	}
	return n, nil
}

// fmtMethods are the interfaces whose methods fmt calls instead of printing a value itself.
var fmtMethods = []reflect.Type{
	reflect.TypeFor[fmt.Formatter](),
	reflect.TypeFor[fmt.Stringer](),
	reflect.TypeFor[fmt.GoStringer](),
	reflect.TypeFor[error](),
}

// hasFmtMethods reports whether fmt may call a method of a value of type t.
func hasFmtMethods(t reflect.Type) bool {
	for _, m := range fmtMethods {
		if t.Implements(m) {
			return true
		}
	}
	return false
}

// argBound bounds what fmt writes for one argument under verb and any flags, with a precision
// (-1 for none) and a width.
func argBound(arg any, verb rune, prec, width, limit int) (int, error) {
	if arg == nil {
		return boundSlack + width, nil
	}
	v := reflect.ValueOf(arg)
	t := v.Type()
	switch {
	case verb == 'T':
		// fmt prints the type's name and calls nothing.
		return len(t.String()) + width, nil
	case verb == 'p' && isPointerLike(t.Kind()):
		return boundSlack + width, nil
	}
	return valueBound(v, verb, prec, width, limit)
}

// isPointerLike reports whether fmt's %p prints a value of kind k as an address.
func isPointerLike(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Chan, reflect.Func, reflect.Map, reflect.Slice, reflect.UnsafePointer:
		return true
	}
	return false
}

// valueBound bounds what fmt writes for v: a string, a number, a boolean, a pointer to one
// (printed as an address), or a slice, array, map or pointer to one whose elements are
// strings, numbers or booleans. Anything else is refused.
func valueBound(v reflect.Value, verb rune, prec, width, limit int) (int, error) {
	t := v.Type()
	if hasFmtMethods(t) {
		return 0, errNotBounded(t)
	}
	// A bad verb prints "%!verb(type=value)".
	framing := len(t.String()) + boundSlack + width
	if n, ok := scalarBound(v, verb, prec, width); ok {
		return framing + n, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return framing, nil
		}
		switch t.Elem().Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			// fmt prints &[...] and &map[...] for a pointer argument to a list.
			m, err := valueBound(v.Elem(), verb, prec, width, limit-framing)
			return framing + m, err
		case reflect.Struct:
			return 0, errNotBounded(t)
		}
		// Any other pointer prints as its address.
		return framing + 2*8, nil
	case reflect.Slice, reflect.Array:
		elem := t.Elem()
		if !isScalarKind(elem.Kind()) || hasFmtMethods(elem) {
			return 0, errNotBounded(t)
		}
		if elem.Kind() == reflect.Uint8 {
			// Bytes print as a string, or one number each: "0b11111111 " is the longest.
			return framing + v.Len()*(12+width), nil
		}
		n := framing
		for i := range v.Len() {
			m, _ := scalarBound(v.Index(i), verb, prec, width)
			if n += m + len(elem.String()) + 2; n > limit {
				return 0, errMemoryExceeded
			}
		}
		return n, nil
	case reflect.Map:
		key, elem := t.Key(), t.Elem()
		if !isScalarKind(key.Kind()) || hasFmtMethods(key) || !isScalarKind(elem.Kind()) || hasFmtMethods(elem) {
			return 0, errNotBounded(t)
		}
		// fmt sorts a copy of the keys and values: two reflect.Values per entry.
		n := framing
		for it := v.MapRange(); it.Next(); {
			k, _ := scalarBound(it.Key(), verb, prec, width)
			e, _ := scalarBound(it.Value(), verb, prec, width)
			if n += k + e + len(key.String()) + len(elem.String()) + 4 + 2*24; n > limit {
				return 0, errMemoryExceeded
			}
		}
		return n, nil
	}
	return 0, errNotBounded(t)
}

// isScalarKind reports whether fmt prints a value of kind k without looking inside it.
func isScalarKind(k reflect.Kind) bool {
	switch k {
	case reflect.String, reflect.Bool, reflect.Uintptr,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}

// scalarBound bounds what fmt writes for a string, number or boolean, under any verb and
// flag, a width and a precision of maxWidthDigits digits at most.
func scalarBound(v reflect.Value, verb rune, prec, width int) (int, bool) {
	p := max(prec, 0)
	switch v.Kind() {
	case reflect.String:
		n := v.Len()
		switch verb {
		case 's', 'v', 'q', 'x', 'X':
			if prec >= 0 {
				n = min(n, utf8.UTFMax*prec)
			}
		}
		switch verb {
		case 's':
		case 'x', 'X':
			// "% #x" writes "0x61 " for each byte.
			n *= 5
		default:
			// %q, %#v and a bad verb's %v quote at most four bytes for each byte.
			n *= 4
		}
		return n + width + 2, true
	case reflect.Float32, reflect.Float64:
		// %f of the largest float64: 309 digits, a sign, a point and the precision.
		return 320 + p + width, true
	case reflect.Complex64, reflect.Complex128:
		return 2*(320+p) + 4 + width, true
	}
	if isScalarKind(v.Kind()) {
		// %#b of a 64-bit integer, or %#U of a rune, with its precision.
		return 72 + p + width, true
	}
	return 0, false
}

// errNotBounded is the refusal of a value whose printed size nothing bounds.
func errNotBounded(t reflect.Type) error {
	return fmt.Errorf("cannot print a value of type %s: only strings, numbers, booleans and lists or maps of them are printed", t)
}
