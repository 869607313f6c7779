package policyschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
)

// yamlToJSON converts a policy to the JSON value an editor's YAML support
// validates: mappings become objects, sequences arrays, and scalars what
// their YAML tag says (an unquoted 2024-07-18 stays a string, as in YAML
// 1.2). The value is the one jsonschema.UnmarshalJSON would produce.
func yamlToJSON(data []byte) (any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("not one YAML document")
	}
	v, err := nodeValue(doc.Content[0])
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

func nodeValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a key that is not a scalar", k.Line)
			}
			if _, dup := m[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q repeated", k.Line, k.Value)
			}
			v, err := nodeValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := nodeValue(c)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		return scalarValue(n)
	}
	return nil, fmt.Errorf("line %d: YAML aliases have no JSON form", n.Line)
}

func scalarValue(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool", "!!int":
		var v any
		err := n.Decode(&v)
		return v, err
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("line %d: %s has no JSON form", n.Line, n.Value)
		}
		return v, nil
	}
	return n.Value, nil // !!str, !!timestamp, !!binary
}

// yamlPath writes a JSON instance location in v as the loader writes a
// YAML path: upstreams[0].timeouts.connect. A segment is an index where v
// holds a list there, else a key (which may be "1").
func yamlPath(v any, loc []string) string {
	var b strings.Builder
	for _, seg := range loc {
		switch x := v.(type) {
		case []any:
			b.WriteString("[" + seg + "]")
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(x) {
				v = x[i]
			}
			continue
		case map[string]any:
			v = x[seg]
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// schemaProblems returns the YAML paths and messages of the innermost
// errors of validating v. An unknown or a missing key is reported at the
// key, as the loader reports it, not at the object holding it.
func schemaProblems(v any, err error) map[string]string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return map[string]string{"(not a validation error)": fmt.Sprint(err)}
	}
	out := map[string]string{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		var keys []string
		switch k := e.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			keys = k.Properties
		case *kind.Required:
			keys = k.Missing
		}
		if len(keys) == 0 {
			out[yamlPath(v, e.InstanceLocation)] = e.Error()
		}
		for _, key := range keys {
			out[yamlPath(v, append(e.InstanceLocation[:len(e.InstanceLocation):len(e.InstanceLocation)], key))] = e.Error()
		}
	}
	walk(ve)
	return out
}

func compile(t testing.TB, doc any) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	if err := c.AddResource("policy.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("policy.schema.json")
	if err != nil {
		t.Fatalf("compiling the schema: %v", err)
	}
	return s
}

func TestYAMLToJSON(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // the JSON encoding of the value
		bad        bool
	}{
		{name: "scalars", yaml: "a: 1\nb: 0x10\nc: 1.5\nd: true\ne: ~\nf: 30s\ng: '7'", want: `{"a":1,"b":16,"c":1.5,"d":true,"e":null,"f":"30s","g":"7"}`},
		{name: "timestamp stays text", yaml: "d: 2024-07-18", want: `{"d":"2024-07-18"}`},
		{name: "nesting", yaml: "a: [{b: [1, x]}]", want: `{"a":[{"b":[1,"x"]}]}`},
		{name: "env reference", yaml: "a: ${X:-1}", want: `{"a":"${X:-1}"}`},
		{name: "alias", yaml: "a: &x 1\nb: *x", bad: true},
		{name: "repeated key", yaml: "a: 1\na: 2", bad: true},
		{name: "infinity", yaml: "a: .inf", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := yamlToJSON([]byte(tt.yaml))
			if tt.bad {
				if err == nil {
					t.Fatalf("converted to %v, want an error", v)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(v)
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestYAMLPath(t *testing.T) {
	v := map[string]any{
		"upstreams": []any{map[string]any{"timeouts": map[string]any{}}},
		"headers":   map[string]any{"1": "x"},
	}
	tests := []struct {
		loc  []string
		want string
	}{
		{nil, ""},
		{[]string{"version"}, "version"},
		{[]string{"upstreams", "0", "timeouts", "connect"}, "upstreams[0].timeouts.connect"},
		{[]string{"upstreams", "7"}, "upstreams[7]"},
		{[]string{"headers", "1"}, "headers.1"},
	}
	for _, tt := range tests {
		if got := yamlPath(v, tt.loc); got != tt.want {
			t.Errorf("yamlPath(%q) = %q, want %q", tt.loc, got, tt.want)
		}
	}
}
