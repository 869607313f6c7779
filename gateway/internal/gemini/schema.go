package gemini

import (
	"strconv"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Gemini takes schemas (function parameters, responseSchema) in its own
// OpenAPI 3.0 subset, not JSON Schema: upper-case type names, nullable
// instead of a "null" type, no $ref, oneOf, allOf, const or
// additionalProperties. appendSchema writes the subset for a JSON Schema
// and refuses the keywords it has no equivalent for, naming the
// keyword's path, rather than send a schema that means something else.

// schemaTypes maps JSON Schema type names to Gemini's.
var schemaTypes = map[string]string{
	"string": "STRING", "number": "NUMBER", "integer": "INTEGER",
	"boolean": "BOOLEAN", "array": "ARRAY", "object": "OBJECT",
}

// appendSchema appends the Gemini schema for the JSON Schema v; at is v's
// path in the request, for errors.
func appendSchema(dst []byte, v *fastjson.Value, at string) ([]byte, error) {
	o, err := v.Object()
	if err != nil {
		return dst, openai.BadRequest(at, "'%s' must be a JSON Schema object", at)
	}
	sw := schemaWriter{out: append(dst, '{'), at: at}
	if t := o.Get("type"); t != nil && t.Type() == fastjson.TypeArray {
		a, _ := t.Array()
		for _, e := range a {
			if s, _ := stringOf(e); string(s) == "null" {
				sw.nullable = true
			}
		}
	}
	o.Visit(sw.keyword)
	if sw.fail != nil {
		return dst, sw.fail
	}
	return append(sw.out, '}'), nil
}

// schemaWriter writes one schema object's keywords.
type schemaWriter struct {
	out      []byte
	at       string // the schema's path
	n        int    // keywords written
	nullable bool   // the type array has "null"
	fail     error
}

// key starts keyword k.
func (sw *schemaWriter) key(k string) {
	if sw.n > 0 {
		sw.out = append(sw.out, ',')
	}
	sw.n++
	sw.out = append(sw.out, '"')
	sw.out = append(sw.out, k...)
	sw.out = append(sw.out, `":`...)
}

// keyword writes keyword k with value e, or sets fail.
func (sw *schemaWriter) keyword(k []byte, e *fastjson.Value) {
	if sw.fail != nil {
		return
	}
	path := sw.at + "." + string(k)
	switch string(k) {
	case "type":
		typ, err := schemaType(e, path)
		if sw.fail = err; err == nil {
			sw.key("type")
			sw.out = append(append(append(sw.out, '"'), typ...), '"')
			if sw.nullable {
				sw.key("nullable")
				sw.out = append(sw.out, "true"...)
			}
		}
	case "properties":
		sw.key("properties")
		sw.out, sw.fail = appendSchemaMap(sw.out, e, path)
	case "items":
		sw.key("items")
		sw.out, sw.fail = appendSchema(sw.out, e, path)
	case "anyOf":
		sw.key("anyOf")
		sw.out, sw.fail = appendSchemaList(sw.out, e, path)
	case "$schema", "$id", "$comment", "examples":
		// Annotations with no effect on what the model generates.
	case "additionalProperties":
		// Gemini generates only the declared properties, which is what
		// false asks for; anything else cannot be expressed.
		if e.Type() != fastjson.TypeFalse {
			sw.fail = openai.BadRequest(path, "'%s' cannot be expressed in a Gemini schema (only false, the default there, can)", path)
		}
	default:
		sw.value(string(k), e, path)
	}
}

// value writes a keyword whose value is copied once checked.
func (sw *schemaWriter) value(k string, e *fastjson.Value, path string) {
	var bad string
	switch k {
	case "enum", "required", "propertyOrdering":
		if sw.fail = stringList(e, path); sw.fail != nil {
			return
		}
	case "description", "title", "format", "pattern":
		if e.Type() != fastjson.TypeString {
			bad = "a string"
		}
	case "nullable":
		if e.Type() != fastjson.TypeTrue && e.Type() != fastjson.TypeFalse {
			bad = "a boolean"
		} else if sw.nullable {
			return // already written with the type
		}
	case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
		if x, err := e.Int64(); err != nil || x < 0 {
			bad = "a non-negative integer"
		}
	case "minimum", "maximum":
		if e.Type() != fastjson.TypeNumber {
			bad = "a number"
		}
	case "default", "example":
	default:
		sw.fail = openai.BadRequest(path, "'%s': the JSON Schema keyword %q cannot be expressed in a Gemini schema", path, k)
		return
	}
	if bad != "" {
		sw.fail = openai.BadRequest(path, "'%s' must be %s", path, bad)
		return
	}
	sw.key(k)
	sw.out = appendValue(sw.out, e)
}

// schemaType returns Gemini's name for a JSON Schema "type": one name, or
// an array of one name and "null".
func schemaType(v *fastjson.Value, at string) (string, error) {
	if s, ok := stringOf(v); ok {
		if t, ok := schemaTypes[string(s)]; ok {
			return t, nil
		}
		return "", openai.BadRequest(at, "'%s' is %q: Gemini schemas have the types string, number, integer, boolean, array and object", at, s)
	}
	a, err := v.Array()
	if err != nil {
		return "", openai.BadRequest(at, "'%s' must be a string or an array of strings", at)
	}
	typ := ""
	for _, e := range a {
		s, _ := stringOf(e)
		if string(s) == "null" {
			continue
		}
		t, ok := schemaTypes[string(s)]
		if !ok || typ != "" {
			return "", openai.BadRequest(at, "'%s' cannot be expressed in a Gemini schema: use one type, optionally with \"null\"", at)
		}
		typ = t
	}
	if typ == "" {
		return "", openai.BadRequest(at, "'%s' cannot be expressed in a Gemini schema: use one type, optionally with \"null\"", at)
	}
	return typ, nil
}

// appendSchemaMap appends an object of named schemas (properties).
func appendSchemaMap(dst []byte, v *fastjson.Value, at string) ([]byte, error) {
	o, err := v.Object()
	if err != nil {
		return dst, openai.BadRequest(at, "'%s' must be an object", at)
	}
	dst = append(dst, '{')
	var fail error
	first := true
	o.Visit(func(k []byte, e *fastjson.Value) {
		if fail != nil {
			return
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = openai.AppendJSONString(dst, k)
		dst = append(dst, ':')
		dst, fail = appendSchema(dst, e, at+"."+string(k))
	})
	if fail != nil {
		return dst, fail
	}
	return append(dst, '}'), nil
}

// appendSchemaList appends an array of schemas (anyOf).
func appendSchemaList(dst []byte, v *fastjson.Value, at string) ([]byte, error) {
	a, err := v.Array()
	if err != nil {
		return dst, openai.BadRequest(at, "'%s' must be an array of schemas", at)
	}
	dst = append(dst, '[')
	for i, e := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendSchema(dst, e, at+"["+strconv.Itoa(i)+"]"); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// stringList checks that v is an array of strings.
func stringList(v *fastjson.Value, at string) error {
	a, err := v.Array()
	if err != nil {
		return openai.BadRequest(at, "'%s' must be an array of strings", at)
	}
	for i, e := range a {
		if e.Type() != fastjson.TypeString {
			return openai.BadRequest(at, "'%s[%d]' must be a string: Gemini schemas take string values here", at, i)
		}
	}
	return nil
}
