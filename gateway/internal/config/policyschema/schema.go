// Package policyschema generates the JSON Schema (draft 2020-12) of the
// policy file from the Go types that decode it, config.Policy and what it
// holds, so the format is written down once: keys and their nesting come
// from the yaml tags (as the strict decoder reads them), descriptions from
// the doc comments in the types' source, and what reflection cannot see
// (enums, required keys) from rules keyed by YAML path, each of which must
// name a key the types have.
//
// The schema is for editors, which check a policy against it as it is
// written; the loader (config.Load, what `tollgate validate` runs) stays
// the authority. The schema rejects what the loader rejects for a policy's
// structure (an unknown key, a wrong type, a value outside an enum, a
// missing required key) and is stricter in two places, on purpose: an
// empty value (null) is accepted only where the Go field is a pointer,
// where it means "not set", and a string field does not take a bare number
// or boolean, which YAML would convert (quote it instead).
//
// The published schema is policies/policy.schema.json; gateway/cmd/policyschema
// writes it (go generate ./policies), and a test fails when it is stale.
// docs/adr/0007-generated-policy-schema.md records why it is generated.
package policyschema

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"github.com/tollgate/tollgate/gateway/internal/builtin"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Draft is the JSON Schema dialect of the generated schema.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// Generate returns the policy file's JSON Schema, indented, with a final
// newline. dir is any directory inside the module's source tree (the
// package's own, in tests and go generate): the doc comments are read from
// the source there.
func Generate(dir string) ([]byte, error) {
	docs, err := newSourceDocs(dir)
	if err != nil {
		return nil, err
	}
	g := &generator{docs: docs, defs: &properties{}, used: map[string]bool{}}
	root, err := g.object(reflect.TypeFor[config.Policy](), "")
	if err != nil {
		return nil, err
	}
	// No title: the YAML language server would head every hover with it.
	root.Schema = Draft
	root.Description = "A Tollgate policy: the listener, the upstreams, the routes from model names to upstreams, the plugins and the stores " +
		"(docs/POLICY.md). `tollgate validate` checks more than this schema can: names that refer to each other, ranges, files."
	if len(g.defs.names) > 0 {
		root.Defs = g.defs
	}
	var unused []string
	for path := range rules {
		if !g.used[path] {
			unused = append(unused, path)
		}
	}
	if len(unused) > 0 {
		slices.Sort(unused)
		return nil, fmt.Errorf("schema rules for keys the policy types do not have: %s", strings.Join(unused, ", "))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encoding the schema: %w", err)
	}
	return b.Bytes(), nil
}

// schema is one JSON Schema object, its keywords in the order they are
// written.
type schema struct {
	Schema      string   `json:"$schema,omitempty"`
	Description string   `json:"description,omitempty"`
	Ref         string   `json:"$ref,omitempty"`
	Type        any      `json:"type,omitempty"` // a name, or a list of names
	Const       any      `json:"const,omitempty"`
	Enum        []string `json:"enum,omitempty"`
	Pattern     string   `json:"pattern,omitempty"`
	// PatternErrorMessage is the YAML language server's message for a
	// string the pattern refuses (other validators ignore it).
	PatternErrorMessage  string      `json:"patternErrorMessage,omitempty"`
	Minimum              *int64      `json:"minimum,omitempty"`
	Maximum              *int64      `json:"maximum,omitempty"`
	MinItems             int         `json:"minItems,omitempty"`
	Items                *schema     `json:"items,omitempty"`
	Properties           *properties `json:"properties,omitempty"`
	Required             []string    `json:"required,omitempty"`
	AdditionalProperties any         `json:"additionalProperties,omitempty"` // false, or a *schema
	AnyOf                []*schema   `json:"anyOf,omitempty"`
	OneOf                []*schema   `json:"oneOf,omitempty"`
	If                   *schema     `json:"if,omitempty"`
	Then                 *schema     `json:"then,omitempty"`
	Defs                 *properties `json:"$defs,omitempty"`
}

// properties is a JSON object of schemas that keeps its keys in the order
// they were added (struct field order), as a reader of the file expects.
type properties struct {
	names   []string
	schemas []*schema
}

func (p *properties) add(name string, s *schema) {
	p.names = append(p.names, name)
	p.schemas = append(p.schemas, s)
}

// MarshalJSON implements json.Marshaler.
func (p *properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range p.names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.schemas[i])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// rule is what the loader's validation requires of one key beyond its Go
// type. Rules are keyed by YAML path, "[]" standing for every element of a
// list, so they outlive a move of the Go types.
type rule struct {
	required bool     // the key must be present
	enum     []string // the only values accepted
	minItems int      // a list needs at least this many elements
	constant any      // the one value accepted
	oneOf    []string // exactly one of these keys of the object is present
	// requiredWhen: the key must be present when the object's key
	// requiredWhen.key is absent or one of requiredWhen.values.
	requiredWhen *condition
}

// condition is a sibling key's values (absent counts as matching: the
// key's default is among the values).
type condition struct {
	key    string
	values []string
}

var rules = map[string]rule{
	"version":                         {required: true, constant: config.Version},
	"upstreams":                       {required: true, minItems: 1},
	"upstreams[].name":                {required: true},
	"upstreams[].provider":            {enum: config.ProviderNames()},
	"upstreams[].base_url":            {requiredWhen: &condition{key: "provider", values: config.ProvidersRequiringBaseURL()}},
	"upstreams[].azure.auth":          {enum: []string{config.AzureAuthAPIKey, config.AzureAuthEntra}},
	"routes":                          {required: true, minItems: 1},
	"routes[]":                        {oneOf: []string{"upstream", "upstreams"}},
	"routes[].models":                 {required: true, minItems: 1},
	"routes[].upstreams[].name":       {required: true},
	"store.kind":                      {enum: []string{config.StoreMemory, config.StorePostgres}},
	"plugins[].name":                  {required: true},
	"plugins[]":                       {oneOf: []string{"path", "builtin"}},
	"plugins[].builtin":               {enum: builtin.Names()},
	"plugins[].on_error":              {enum: []string{config.FailClosed, config.FailOpen}},
	"tenants.plans[].id":              {required: true},
	"tenants.tenants[].id":            {required: true},
	"tenants.tenants[].plan":          {required: true},
	"tenants.tenants[].status":        {enum: []string{tenant.StatusActive, tenant.StatusSuspended}},
	"tenants.tenants[].keys[]":        {oneOf: []string{"key_sha256", "key_env"}},
	"tenants.tenants[].keys[].id":     {required: true},
	"tenants.tenants[].keys[].status": {enum: []string{tenant.StatusActive, tenant.StatusRevoked}},
	"tenants.prices[].model":          {required: true},
	"passthrough.files.plans":         {required: true, minItems: 1},
	"mcp.servers[].transport":         {enum: []string{config.MCPStreamableHTTP, config.MCPSSE}},
	"pricing.unpriced":                {enum: []string{config.UnpricedFree, config.UnpricedRefuse}},
	"server.tls.cert_file":            {required: true},
	"server.tls.key_file":             {required: true},
	"server.tls.min_version":          {enum: []string{"1.2", "1.3"}},
	"admin.tls.cert_file":             {required: true},
	"admin.tls.key_file":              {required: true},
	"admin.tls.min_version":           {enum: []string{"1.2", "1.3"}},
	"admin.tls.client_auth":           {enum: []string{config.ClientAuthNone, config.ClientAuthRequest, config.ClientAuthRequire}},
}

// generator builds the schema of one type tree.
type generator struct {
	docs *sourceDocs
	defs *properties     // shared scalar schemas, by name, in order of first use
	used map[string]bool // the rules applied
}

var (
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// of returns the schema of a value of type t at YAML path at.
func (g *generator) of(t reflect.Type, at string) (*schema, error) {
	if t.Kind() == reflect.Pointer {
		s, err := g.of(t.Elem(), at)
		if err != nil {
			return nil, err
		}
		return nullable(s), nil
	}
	s, err := g.value(t, at)
	if err != nil {
		return nil, err
	}
	return g.applyRule(s, at), nil
}

func (g *generator) value(t reflect.Type, at string) (*schema, error) {
	if sc, ok := scalars[t]; ok {
		return g.ref(sc)
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil, fmt.Errorf("%s (at %s) decodes itself: describe what it accepts in policyschema's scalars", t, orRoot(at))
	}
	switch t.Kind() {
	case reflect.String:
		return &schema{Type: "string"}, nil
	case reflect.Bool:
		return &schema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return integer(t), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return integer(t), nil
	case reflect.Float32, reflect.Float64:
		return &schema{Type: "number"}, nil
	case reflect.Interface:
		return &schema{}, nil // free-form: any YAML value
	case reflect.Slice, reflect.Array:
		items, err := g.of(t.Elem(), at+"[]")
		if err != nil {
			return nil, err
		}
		return &schema{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s (at %s): map keys must be strings", t, orRoot(at))
		}
		values, err := g.of(t.Elem(), at+".*")
		if err != nil {
			return nil, err
		}
		return &schema{Type: "object", AdditionalProperties: values}, nil
	case reflect.Struct:
		return g.object(t, at)
	}
	return nil, fmt.Errorf("%s (at %s): no JSON Schema for a %s", t, orRoot(at), t.Kind())
}

// integer is the schema of an integer type: the decoder refuses a number
// the type cannot hold. int, uint and the 64-bit types are left unbounded:
// the schema must not depend on the platform that generates it, and JSON
// numbers that large are not exact in most editors.
func integer(t reflect.Type) *schema {
	s := &schema{Type: "integer"}
	switch k := t.Kind(); k {
	case reflect.Int8, reflect.Int16, reflect.Int32:
		bits := t.Bits()
		s.Minimum, s.Maximum = ptr(-int64(1)<<(bits-1)), ptr(int64(1)<<(bits-1)-1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		s.Minimum, s.Maximum = ptr(int64(0)), ptr(int64(1)<<t.Bits()-1)
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		s.Minimum = ptr(int64(0))
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// object is the schema of a struct: one property per yaml-tagged field, as
// the strict decoder reads them, and no others.
func (g *generator) object(t reflect.Type, at string) (*schema, error) {
	s := &schema{Type: "object", Properties: &properties{}, AdditionalProperties: false}
	td, err := g.docs.lookup(t.PkgPath(), t.Name())
	if err != nil {
		return nil, err
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" || key == "-" {
			continue // the decoder treats such a key as unknown
		}
		path := join(at, key)
		fs, err := g.of(f.Type, path)
		if err != nil {
			return nil, err
		}
		if fs.Description, err = g.describe(f, td, key); err != nil {
			return nil, err
		}
		s.Properties.add(key, fs)
		r := rules[path]
		if r.required {
			s.Required = append(s.Required, key)
		}
		if c := r.requiredWhen; c != nil {
			// An interpolated value is in none of c.values: the loader,
			// which sees the value, decides then.
			cond := &schema{Properties: &properties{}}
			cond.Properties.add(c.key, &schema{Enum: c.values})
			s.If, s.Then = cond, &schema{Required: []string{key}}
		}
	}
	return s, nil
}

// describe is a field's doc comment, its Go name replaced by its key, or
// else the doc comment of the struct type it holds.
func (g *generator) describe(f reflect.StructField, owner typeDoc, key string) (string, error) {
	if doc := owner.fields[f.Name]; doc != "" {
		if rest, ok := strings.CutPrefix(doc, f.Name+" "); ok {
			return key + " " + rest, nil
		}
		return doc, nil
	}
	t := f.Type
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.Name() == "" {
		return "", nil
	}
	td, err := g.docs.lookup(t.PkgPath(), t.Name())
	return td.doc, err
}

// applyRule adds the rule for path at, if any, to s.
func (g *generator) applyRule(s *schema, at string) *schema {
	r, ok := rules[at]
	if !ok {
		return s
	}
	g.used[at] = true
	if r.constant != nil {
		s.Const = r.constant
	}
	s.MinItems = r.minItems
	for _, key := range r.oneOf {
		s.OneOf = append(s.OneOf, &schema{Required: []string{key}})
	}
	if len(r.enum) > 0 {
		// A value may also come from the environment: the loader expands
		// ${VAR:-default} before it checks the value.
		s.Enum = r.enum
		interpolated, _ := g.ref(interpolatedDef)
		return &schema{AnyOf: []*schema{s, interpolated}}
	}
	return s
}

// nullable lets s also be null: for a pointer field, null leaves it unset.
func nullable(s *schema) *schema {
	if name, ok := s.Type.(string); ok && s.Ref == "" && len(s.AnyOf) == 0 && len(s.OneOf) == 0 {
		s.Type = []string{name, "null"}
		return s
	}
	return &schema{AnyOf: []*schema{s, {Type: "null"}}}
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

func orRoot(at string) string {
	if at == "" {
		return "(root)"
	}
	return at
}

// scalarDef is a shared schema under $defs for a scalar the decoder reads
// in its own way.
type scalarDef struct {
	name  string
	build func(g *generator) (*schema, error)
}

// ref returns a reference to d, adding d to $defs on first use.
func (g *generator) ref(d scalarDef) (*schema, error) {
	if !slices.Contains(g.defs.names, d.name) {
		s, err := d.build(g)
		if err != nil {
			return nil, err
		}
		g.defs.add(d.name, s)
	}
	return &schema{Ref: "#/$defs/" + d.name}, nil
}

// envRef matches a reference the loader expands (see config.Parse); the
// same syntax as its own pattern, written for both RE2 and ECMAScript.
const envRef = `\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}`

// interpolatedDef is a string with environment references. It has no
// description on purpose: an editor's hover shows the description of the
// innermost schema a value matches, and the key's own says more.
var interpolatedDef = scalarDef{name: "interpolated", build: func(*generator) (*schema, error) {
	return &schema{Type: "string", Pattern: envRef}, nil
}}

// fromEnv ends the description of a value that may come from the
// environment.
const fromEnv = " Or ${VAR:-default}, expanded from the environment when the policy is loaded."

// The scalar schemas below take an environment reference in the same
// schema, not in an anyOf branch: a string's pattern accepts either form,
// and a keyword applies only to the type it is for (minimum to numbers,
// pattern to strings). An editor's hover then shows the key's description
// and its error names what was expected, which anyOf branches confuse.
var scalars = map[reflect.Type]scalarDef{
	reflect.TypeFor[time.Duration](): {name: "duration", build: func(*generator) (*schema, error) {
		return &schema{
			Description:         `A duration: numbers with units (ns, us, ms, s, m, h), e.g. "250ms", "30s", "1h30m"; "0s" is zero. A bare number is not a duration.` + fromEnv,
			Type:                "string",
			Pattern:             `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$|` + envRef,
			PatternErrorMessage: `not a duration: write a number with a unit, e.g. 250ms, 30s, 1h30m`,
		}, nil
	}},
	reflect.TypeFor[config.ByteSize](): {name: "byteSize", build: func(g *generator) (*schema, error) {
		t := reflect.TypeFor[config.ByteSize]()
		td, err := g.docs.lookup(t.PkgPath(), t.Name())
		if err != nil {
			return nil, err
		}
		desc := td.doc
		if rest, ok := strings.CutPrefix(td.doc, t.Name()+" is a "); ok {
			desc = "A " + rest
		}
		return &schema{
			Description:         desc + fromEnv,
			Type:                []string{"integer", "string"},
			Minimum:             ptr(int64(0)),
			Pattern:             `^\s*[0-9]+\s*(B|KB|MB|GB|KiB|MiB|GiB)?\s*$|` + envRef,
			PatternErrorMessage: `not a size: write bytes, or a whole number with a unit (B, KB, MB, GB, KiB, MiB, GiB), e.g. 4MiB`,
		}, nil
	}},
	reflect.TypeFor[config.PluginSelection](): {name: "pluginSelection", build: func(*generator) (*schema, error) {
		// No description: the key's own says what the selection is.
		return &schema{AnyOf: []*schema{
			{Type: "string", Pattern: `^.+$`},
			{Type: "array", Items: &schema{Type: "string"}},
		}}, nil
	}},
	reflect.TypeFor[time.Time](): {name: "timestamp", build: func(*generator) (*schema, error) {
		// The forms YAML reads as a timestamp, unquoted; a quoted string
		// is not decoded into a time, so ${VAR} cannot stand for one.
		return &schema{
			Description: "A date (2024-07-18) or a time (2024-07-18T10:00:00Z, 2024-07-18 10:00:00), unquoted.",
			Type:        "string",
			Pattern: `^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}` +
				`([Tt][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})` +
				`| [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?)?$`,
			PatternErrorMessage: "not a date or time: write 2024-07-18 or 2024-07-18T10:00:00Z, unquoted",
		}, nil
	}},
}
