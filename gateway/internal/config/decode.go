package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads and validates the policy file at path, resolving environment
// references with os.LookupEnv.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	return parse(data, filepath.Dir(path), os.LookupEnv)
}

// Parse decodes and validates a policy. lookupEnv resolves ${VAR} and
// ${VAR:-default} references in string values and api_key_env; nil means
// os.LookupEnv. A returned error of type Problems lists every problem found.
// Relative plugin paths are resolved against the working directory.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (*Policy, error) {
	return parse(data, "", lookupEnv)
}

// ParseIn is Parse for a policy whose relative plugin paths are resolved
// against dir.
func ParseIn(data []byte, dir string, lookupEnv func(string) (string, bool)) (*Policy, error) {
	return parse(data, dir, lookupEnv)
}

func parse(data []byte, dir string, lookupEnv func(string) (string, bool)) (*Policy, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Problems{{Path: "(file)", Message: "the policy is empty"}}
		}
		return nil, Problems{{Path: "(file)", Message: "not valid YAML: " + err.Error()}}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	var ps Problems
	lines := map[int]string{}
	walkStrict(root, reflect.TypeOf(Policy{}), "", lookupEnv, lines, &ps)
	if len(ps) > 0 {
		return nil, ps
	}
	var p Policy
	if err := root.Decode(&p); err != nil {
		return nil, decodeProblems(err, lines)
	}
	p.Dir = dir
	p.applyDefaults()
	if ps := p.validate(lookupEnv); len(ps) > 0 {
		return nil, ps
	}
	return &p, nil
}

// walkStrict checks n against the Go type t: every mapping key must name a
// yaml-tagged field. It expands environment references in scalars in place
// and records the YAML path of every line for later decode errors.
func walkStrict(n *yaml.Node, t reflect.Type, at string, env func(string) (string, bool), lines map[int]string, ps *Problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, seen := lines[n.Line]; !seen && at != "" {
		lines[n.Line] = at
	}
	if n.Kind == yaml.AliasNode {
		*ps = append(*ps, Problem{Path: orRoot(at), Line: n.Line, Message: "YAML aliases are not supported in policies"})
		return
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!str" || n.Tag == "" {
			v, err := expandEnv(n.Value, env)
			if err != nil {
				*ps = append(*ps, Problem{Path: orRoot(at), Line: n.Line, Message: err.Error()})
			}
			n.Value = v
		}
		return
	case yaml.MappingNode:
		switch t.Kind() {
		case reflect.Struct:
			fields := yamlFields(t)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				ft, ok := fields[k.Value]
				kp := join(at, k.Value)
				if !ok {
					*ps = append(*ps, Problem{Path: kp, Line: k.Line, Message: fmt.Sprintf("unknown field (known: %s)", knownList(fields))})
					continue
				}
				lines[k.Line] = kp
				walkStrict(v, ft, kp, env, lines, ps)
			}
		case reflect.Map, reflect.Interface:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				kp := join(at, k.Value)
				lines[k.Line] = kp
				walkStrict(v, elemOf(t), kp, env, lines, ps)
			}
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Interface {
			for i, c := range n.Content {
				walkStrict(c, elemOf(t), fmt.Sprintf("%s[%d]", at, i), env, lines, ps)
			}
		}
	}
}

// elemOf is the element type of a map or slice; free-form (any) values
// stay free-form all the way down.
func elemOf(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Interface {
		return t
	}
	return t.Elem()
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
	}
	return fields
}

func knownList(fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
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

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandEnv replaces ${VAR} and ${VAR:-default} in s. An unset VAR without
// a default is an error; "$$" is a literal "$".
func expandEnv(s string, env func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var missing []string
	out := envRef.ReplaceAllStringFunc(strings.ReplaceAll(s, "$$", "\x00"), func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		if v, ok := env(m[1]); ok && v != "" {
			return v
		}
		if m[2] != "" {
			return m[3]
		}
		missing = append(missing, m[1])
		return ""
	})
	out = strings.ReplaceAll(out, "\x00", "$")
	if len(missing) > 0 {
		return out, fmt.Errorf("environment variable %s is not set and has no default (write ${%s:-default})", strings.Join(missing, ", "), missing[0])
	}
	return out, nil
}

var lineRe = regexp.MustCompile(`line (\d+): `)

// decodeProblems turns yaml type errors into Problems carrying YAML paths.
func decodeProblems(err error, lines map[int]string) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	ps := make(Problems, 0, len(msgs))
	for _, e := range msgs {
		p := Problem{Path: "(file)", Message: e}
		if m := lineRe.FindStringSubmatch(e); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Message = strings.TrimPrefix(e, m[0])
			if path, ok := lines[p.Line]; ok {
				p.Path = path
			}
		}
		ps = append(ps, p)
	}
	return ps
}

// ByteSize is a number of bytes written as an integer or with a unit:
// "512KiB", "4MiB", "1GiB", "10MB".
type ByteSize int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// ParseByteSize parses "4194304", "4MiB", "512 KiB", "10MB".
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:])
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 4194304, 512KiB, 4MiB)", s)
	}
	mult := map[string]int64{"": 1, "B": 1, "KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("invalid size unit %q in %q (use B, KB, MB, GB, KiB, MiB, GiB)", unit, s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(n * mult), nil
}
