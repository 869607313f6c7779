package chains

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrNotObject is returned for a patch or config that is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// MergePatch applies patch to target as RFC 7386 says (a JSON merge
// patch): an object's members replace target's of the same name, null
// removes one, objects merge recursively, anything else replaces the
// whole value. Both must be JSON objects (a plugin's config is one). The
// result is encoded with sorted keys, so equal configs are equal bytes.
func MergePatch(target, patch []byte) ([]byte, error) {
	t, err := decodeObject(target, true)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	p, err := decodeObject(patch, false)
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	return encode(merge(t, p))
}

// decodeObject decodes a JSON object; empty input is {} when allowEmpty
// (a plugin without a config).
func decodeObject(b []byte, allowEmpty bool) (map[string]any, error) {
	if allowEmpty && len(bytes.TrimSpace(b)) == 0 {
		return map[string]any{}, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // large integers stay exact
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ErrNotObject
	}
	return m, nil
}

// merge is RFC 7386's MergePatch(Target, Patch) for an object patch.
func merge(target any, patch map[string]any) any {
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(t, k)
		case map[string]any:
			t[k] = merge(t[k], pv)
		default:
			t[k] = v
		}
	}
	return t
}

func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Canonical re-encodes a JSON object config with sorted keys (what
// MergePatch returns), so that it compares with merged configs by bytes.
func Canonical(config []byte) ([]byte, error) {
	m, err := decodeObject(config, true)
	if err != nil {
		return nil, err
	}
	return encode(m)
}
