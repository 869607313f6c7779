package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestPolicySchema(t *testing.T) {
	published, err := os.ReadFile("../../../policies/policy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		wantOut    []byte // exactly, when set
		wantStderr string
	}{
		{"schema", []string{"policy", "schema"}, 0, published, ""},
		{"no subcommand", []string{"policy"}, 2, nil, "tollgate policy schema"},
		{"unknown subcommand", []string{"policy", "lint"}, 2, nil, "tollgate policy schema"},
		{"extra argument", []string{"policy", "schema", "x"}, 2, nil, "tollgate policy schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tt.args, &out, &errOut); code != tt.code {
				t.Fatalf("exit code %d, want %d (stderr: %s)", code, tt.code, errOut.String())
			}
			if tt.wantOut != nil && !bytes.Equal(out.Bytes(), tt.wantOut) {
				t.Errorf("printed %d bytes, not the %d of policies/policy.schema.json", out.Len(), len(tt.wantOut))
			}
			if !strings.Contains(errOut.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", errOut.String(), tt.wantStderr)
			}
		})
	}
}

// The schema printed is a draft 2020-12 schema of an object, as editors
// expect.
func TestPolicySchemaIsJSONSchema(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"policy", "schema"}, &out, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	var doc struct {
		Schema     string         `json:"$schema"`
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != "https://json-schema.org/draft/2020-12/schema" || doc.Type != "object" || doc.Properties["upstreams"] == nil {
		t.Errorf("$schema %q, type %q, %d properties (upstreams: %v)", doc.Schema, doc.Type, len(doc.Properties), doc.Properties["upstreams"] != nil)
	}
}
