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

package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// UnknownField is a field of the config file that the format does not declare. It is
// ignored, as spire-controller-manager ignores it.
type UnknownField struct {
	// Field is the field's full path, e.g. leaderElection.foo.
	Field string
	// Suggestion, when not empty, is the full path of the declared field at the same place
	// whose name is close enough that it was probably meant, e.g. trustDomain for
	// trustdomain.
	Suggestion string
}

// String names the field, and the field probably meant when there is one.
func (u UnknownField) String() string {
	if u.Suggestion == "" {
		return u.Field
	}
	return u.Field + " (did you mean " + u.Suggestion + "?)"
}

// decoded is what decode makes of a config file.
type decoded struct {
	file File
	// unknown are the fields File does not declare, each once, in the order found.
	unknown []UnknownField
	// duplicates are the paths of the fields set more than once in one mapping.
	duplicates []string
}

// decode turns a config file's YAML (or JSON) into a File the way spire-controller-manager's
// decoder, apimachinery's non-strict YAML serializer, does: the YAML becomes JSON, a key
// set twice keeps its last value, keys match field names case-sensitively, and keys no field
// declares are ignored. Unknown and duplicated fields are returned rather than failed, so that
// a file spire-controller-manager starts with starts spire-registrar too, and a Helm chart
// that writes a field newer than this binary does not stop it. A value of the wrong type is
// an error naming its field.
func decode(data []byte) (*decoded, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	d := &decoded{}
	// Only unknown fields are asked for: YAMLToJSON has already kept the last of duplicated
	// keys, so the JSON has none; duplicateFields finds them in the YAML.
	strictErrs, err := kjson.UnmarshalStrict(jsonData, &d.file, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, decodingError(err)
	}
	fileType := reflect.TypeFor[File]()
	for _, e := range strictErrs {
		path := e.Error()
		var fieldErr kjson.FieldError
		if errors.As(e, &fieldErr) {
			path = fieldErr.FieldPath()
		}
		if path == "" {
			path = `""` // a key that is the empty string
		}
		d.unknown = append(d.unknown, UnknownField{Field: path, Suggestion: suggestField(fileType, path)})
	}
	d.duplicates = duplicateFields(data)
	return d, nil
}

// decodingError rewords a JSON type error in the config file's terms: the field's path and
// the kinds of YAML value expected and found, instead of Go's struct and type names.
func decodingError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		return fmt.Errorf("decoding: %w", err)
	}
	if typeErr.Field == "" {
		return fmt.Errorf("decoding: the file must be a mapping of fields, got %s", describeJSONValue(typeErr.Value))
	}
	err = fmt.Errorf("decoding: %s: want %s, got %s", typeErr.Field, describeType(typeErr.Type), describeJSONValue(typeErr.Value))
	if derefType(typeErr.Type).Kind() == reflect.String && (typeErr.Value == "bool" || strings.HasPrefix(typeErr.Value, "number")) {
		// YAML 1.1 reads y, on, yes, 123 and 1.5 as booleans and numbers; neither
		// spire-controller-manager nor spire-registrar turns them back into strings.
		err = fmt.Errorf("%w: quote the value", err)
	}
	return err
}

// describeJSONValue names a JSON value as encoding/json's type errors give it ("array",
// "number 1.5") in YAML's words.
func describeJSONValue(value string) string {
	switch value {
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	case "bool":
		return "a boolean"
	case "string", "number":
		return "a " + value
	}
	return value
}

// describeType names what a Go type accepts in YAML's words.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// duplicateFields returns the paths of the keys set more than once in one mapping of data's
// YAML, each once, in the order found. It reads the YAML with the parser YAMLToJSON uses, so
// it sees the keys decode sees; keys brought in by a merge key (<<) are not seen, which is
// right, as explicit keys override merged ones by YAML's rules.
func duplicateFields(data []byte) []string {
	var doc yamlv2.MapSlice
	if err := yamlv2.Unmarshal(data, &doc); err != nil {
		// Not a mapping: decode has already failed on it, or it holds no fields.
		return nil
	}
	var found []string
	var walk func(path string, value any)
	walk = func(path string, value any) {
		switch v := value.(type) {
		case yamlv2.MapSlice:
			seen := make(map[string]int, len(v))
			for _, item := range v {
				child := fmt.Sprint(item.Key)
				if path != "" {
					child = path + "." + child
				}
				seen[child]++
				if seen[child] == 2 {
					found = append(found, child)
				}
				walk(child, item.Value)
			}
		case []any:
			for i, item := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), item)
			}
		}
	}
	walk("", doc)
	return found
}

// suggestField returns the full path of the field declared next to the unknown field at path
// whose name is probably the one meant, or "" when none is close enough. A name that differs
// only in case always matches, as those keys are not matched case-insensitively; otherwise the
// closest name within a few edits of it, where the allowance grows with the name's length so
// that a short new field is not mistaken for a typo.
func suggestField(root reflect.Type, path string) string {
	parent, name := "", path
	if i := strings.LastIndex(path, "."); i >= 0 {
		parent, name = path[:i], path[i+1:]
	}
	length := utf8.RuneCountInString(name)
	allowed := min(3, max(1, length/4))
	best, bestDistance := "", -1
	for _, candidate := range fieldNamesAt(root, parent) {
		if strings.EqualFold(candidate, name) {
			best = candidate
			break
		}
		if abs(utf8.RuneCountInString(candidate)-length) > allowed {
			// Each edit changes the length by at most one: too far, and a long key costs
			// nothing to rule out.
			continue
		}
		distance := editDistance(strings.ToLower(name), strings.ToLower(candidate))
		if distance <= allowed && (bestDistance < 0 || distance < bestDistance) {
			best, bestDistance = candidate, distance
		}
	}
	if best == "" || parent == "" {
		return best
	}
	return parent + "." + best
}

// fieldNamesAt returns the JSON names of the struct fields found at path in t, a path as
// sigs.k8s.io/json reports it: names joined by dots, map keys as names, list indexes as
// [i]. It returns nil when the path does not lead to a struct.
func fieldNamesAt(t reflect.Type, path string) []string {
	var segments []string
	if path != "" {
		segments = strings.Split(path, ".")
	}
	for _, segment := range segments {
		name, _, _ := strings.Cut(segment, "[")
		t = derefType(t)
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByJSONName(t, name)
			if !ok {
				return nil
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		default:
			return nil
		}
		for range strings.Count(segment, "[") {
			t = derefType(t)
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
		}
	}
	t = derefType(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		if name, ok := jsonName(t.Field(i)); ok {
			names = append(names, name)
		}
	}
	return names
}

// abs returns the absolute value of n.
func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// derefType strips pointers off t.
func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldByJSONName returns the field of struct type t whose JSON name is name.
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if n, ok := jsonName(t.Field(i)); ok && n == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// jsonName returns the key a struct field is decoded from, and false for fields JSON skips.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return "", false
	case "":
		return f.Name, true
	}
	return name, true
}

// editDistance is the optimal string alignment distance between a and b: the fewest
// insertions, deletions, substitutions and swaps of adjacent runes that turn one into the
// other, so that trustDomian is one edit from trustDomain.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// prev2, prev and cur are the rows of the distance table for x[:i-2], x[:i-1] and x[:i]:
	// each holds the distances to every prefix of y.
	prev2 := make([]int, len(y)+1)
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}
