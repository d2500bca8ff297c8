// Package jsonschema validates JSON documents against the subset of JSON Schema (draft
// 2020-12) that docs/torrent.schema.json uses: type (one or a list), enum, required,
// properties, additionalProperties (a boolean), items, minItems, minLength, minimum,
// maximum, pattern and format "date-time". Any other keyword is an error at compile time,
// so a schema that outgrows this subset fails loudly instead of being half-checked.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Schema is a compiled schema.
type Schema struct {
	types      []string
	enum       []any
	required   []string
	properties map[string]*Schema
	additional *bool
	items      *Schema
	minItems   *int
	minLength  *int
	minimum    *big.Rat
	maximum    *big.Rat
	pattern    *regexp.Regexp
	format     string
}

var annotations = map[string]bool{"$schema": true, "$id": true, "title": true, "description": true}

// Compile parses a schema document.
func Compile(doc []byte) (*Schema, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, err
	}
	return compile(v, "#")
}

func compile(v any, at string) (*Schema, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: a schema must be an object", at)
	}
	s := &Schema{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := m[k]
		where := at + "/" + k
		var err error
		switch k {
		case "type":
			s.types, err = stringList(val, where)
		case "enum":
			list, ok := val.([]any)
			if !ok {
				return nil, fmt.Errorf("%s: expected an array", where)
			}
			s.enum = list
		case "required":
			s.required, err = stringList(val, where)
		case "properties":
			props, ok := val.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: expected an object", where)
			}
			s.properties = map[string]*Schema{}
			for name, sub := range props {
				if s.properties[name], err = compile(sub, where+"/"+name); err != nil {
					return nil, err
				}
			}
		case "additionalProperties":
			b, ok := val.(bool)
			if !ok {
				return nil, fmt.Errorf("%s: only a boolean is supported", where)
			}
			s.additional = &b
		case "items":
			s.items, err = compile(val, where)
		case "minItems":
			s.minItems, err = count(val, where)
		case "minLength":
			s.minLength, err = count(val, where)
		case "minimum":
			s.minimum, err = rational(val, where)
		case "maximum":
			s.maximum, err = rational(val, where)
		case "pattern":
			p, ok := val.(string)
			if !ok {
				return nil, fmt.Errorf("%s: expected a string", where)
			}
			s.pattern, err = regexp.Compile(p)
		case "format":
			f, ok := val.(string)
			if !ok || f != "date-time" {
				return nil, fmt.Errorf("%s: only \"date-time\" is supported", where)
			}
			s.format = f
		default:
			if !annotations[k] {
				return nil, fmt.Errorf("%s: keyword not supported by this validator", where)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Validate checks one JSON document; the error names the first failing location.
func (s *Schema) Validate(doc []byte) error {
	v, err := decode(doc)
	if err != nil {
		return err
	}
	return s.validate(v, "$")
}

func (s *Schema) validate(v any, at string) error {
	if len(s.types) > 0 && !s.hasType(v) {
		return fmt.Errorf("%s: %s is not of type %s", at, typeOf(v), strings.Join(s.types, " or "))
	}
	if s.enum != nil && !s.inEnum(v) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, s.enum)
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range s.required {
			if _, ok := x[name]; !ok {
				return fmt.Errorf("%s: required property %q missing", at, name)
			}
		}
		names := make([]string, 0, len(x))
		for name := range x {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			sub, known := s.properties[name]
			if !known {
				if s.additional != nil && !*s.additional {
					return fmt.Errorf("%s: property %q not allowed", at, name)
				}
				continue
			}
			if err := sub.validate(x[name], at+"."+name); err != nil {
				return err
			}
		}
	case []any:
		if s.minItems != nil && len(x) < *s.minItems {
			return fmt.Errorf("%s: %d items, fewer than %d", at, len(x), *s.minItems)
		}
		if s.items != nil {
			for i, item := range x {
				if err := s.items.validate(item, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case string:
		if s.minLength != nil && utf8.RuneCountInString(x) < *s.minLength {
			return fmt.Errorf("%s: %q shorter than %d", at, x, *s.minLength)
		}
		if s.pattern != nil && !s.pattern.MatchString(x) {
			return fmt.Errorf("%s: %q does not match %s", at, x, s.pattern)
		}
		if s.format == "date-time" {
			if _, err := time.Parse(time.RFC3339, x); err != nil {
				return fmt.Errorf("%s: %q is not a date-time: %v", at, x, err)
			}
		}
	case json.Number:
		r, _ := new(big.Rat).SetString(string(x))
		if s.minimum != nil && r.Cmp(s.minimum) < 0 {
			return fmt.Errorf("%s: %s below the minimum %s", at, x, s.minimum.RatString())
		}
		if s.maximum != nil && r.Cmp(s.maximum) > 0 {
			return fmt.Errorf("%s: %s above the maximum %s", at, x, s.maximum.RatString())
		}
	}
	return nil
}

func (s *Schema) hasType(v any) bool {
	for _, t := range s.types {
		if t == typeOf(v) || (t == "number" && typeOf(v) == "integer") {
			return true
		}
	}
	return false
}

func (s *Schema) inEnum(v any) bool {
	enc, _ := json.Marshal(v)
	for _, e := range s.enum {
		if want, _ := json.Marshal(e); bytes.Equal(enc, want) {
			return true
		}
	}
	return false
}

// typeOf names a decoded value's JSON Schema type; a number with no fractional part is an
// "integer" (2020-12: 1.0 is an integer).
func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// decode reads one JSON value with exact numbers, refusing trailing data.
func decode(doc []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if d.More() {
		return nil, fmt.Errorf("invalid JSON: trailing data")
	}
	return v, nil
}

func stringList(v any, at string) ([]string, error) {
	if s, ok := v.(string); ok {
		return []string{s}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: expected a string or an array of strings", at)
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("%s: expected strings", at)
		}
		out = append(out, s)
	}
	return out, nil
}

func count(v any, at string) (*int, error) {
	r, err := rational(v, at)
	if err != nil || !r.IsInt() || r.Sign() < 0 || !r.Num().IsInt64() {
		return nil, fmt.Errorf("%s: expected a non-negative integer", at)
	}
	n := int(r.Num().Int64())
	return &n, nil
}

func rational(v any, at string) (*big.Rat, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf("%s: expected a number", at)
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil, fmt.Errorf("%s: bad number %s", at, n)
	}
	return r, nil
}
