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
func appendSchema(dst []byte, v *fastjson.Value, at string, depth int) ([]byte, error) {
	o, err := v.Object()
	if err != nil {
		return dst, openai.BadRequest(at, "'%s' must be a JSON Schema object", at)
	}
	var fail error
	nullable := false
	if t := o.Get("type"); t != nil && t.Type() == fastjson.TypeArray {
		a, _ := t.Array()
		for _, e := range a {
			if s, _ := stringOf(e); string(s) == "null" {
				nullable = true
			}
		}
	}
	dst = append(dst, '{')
	n := 0
	key := func(k string) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, '"')
		dst = append(dst, k...)
		dst = append(dst, `":`...)
	}
	o.Visit(func(k []byte, e *fastjson.Value) {
		if fail != nil {
			return
		}
		path := at + "." + string(k)
		switch string(k) {
		case "type":
			var typ string
			typ, fail = schemaType(e, path)
			if fail == nil {
				key("type")
				dst = append(dst, '"')
				dst = append(dst, typ...)
				dst = append(dst, '"')
				if nullable {
					key("nullable")
					dst = append(dst, "true"...)
				}
			}
		case "properties":
			key("properties")
			dst, fail = appendSchemaMap(dst, e, path, depth)
		case "items":
			key("items")
			dst, fail = appendSchema(dst, e, path, depth+1)
		case "anyOf":
			key("anyOf")
			dst, fail = appendSchemaList(dst, e, path, depth)
		case "enum", "required", "propertyOrdering":
			if fail = stringList(e, path); fail == nil {
				key(string(k))
				dst = appendValue(dst, e)
			}
		case "description", "title", "format", "pattern":
			if e.Type() != fastjson.TypeString {
				fail = openai.BadRequest(path, "'%s' must be a string", path)
				return
			}
			key(string(k))
			dst = appendValue(dst, e)
		case "nullable":
			if e.Type() != fastjson.TypeTrue && e.Type() != fastjson.TypeFalse {
				fail = openai.BadRequest(path, "'%s' must be a boolean", path)
			} else if !nullable {
				key("nullable")
				dst = appendValue(dst, e)
			}
		case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
			if x, err := e.Int64(); err != nil || x < 0 {
				fail = openai.BadRequest(path, "'%s' must be a non-negative integer", path)
				return
			}
			key(string(k))
			dst = e.MarshalTo(dst)
		case "minimum", "maximum":
			if e.Type() != fastjson.TypeNumber {
				fail = openai.BadRequest(path, "'%s' must be a number", path)
				return
			}
			key(string(k))
			dst = e.MarshalTo(dst)
		case "default", "example":
			key(string(k))
			dst = appendValue(dst, e)
		case "$schema", "$id", "$comment", "examples":
			// Annotations with no effect on what the model generates.
		case "additionalProperties":
			// Gemini generates only the declared properties, which is what
			// false asks for; anything else cannot be expressed.
			if e.Type() != fastjson.TypeFalse {
				fail = openai.BadRequest(path, "'%s' cannot be expressed in a Gemini schema (only false, the default there, can)", path)
			}
		default:
			fail = openai.BadRequest(path, "'%s': the JSON Schema keyword %q cannot be expressed in a Gemini schema", path, k)
		}
	})
	if fail != nil {
		return dst, fail
	}
	return append(dst, '}'), nil
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
func appendSchemaMap(dst []byte, v *fastjson.Value, at string, depth int) ([]byte, error) {
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
		dst, fail = appendSchema(dst, e, at+"."+string(k), depth+1)
	})
	if fail != nil {
		return dst, fail
	}
	return append(dst, '}'), nil
}

// appendSchemaList appends an array of schemas (anyOf).
func appendSchemaList(dst []byte, v *fastjson.Value, at string, depth int) ([]byte, error) {
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
		if dst, err = appendSchema(dst, e, at+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
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
