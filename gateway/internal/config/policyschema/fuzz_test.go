package policyschema

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// FuzzSchemaRejectsWhatLoaderRejects checks the schema against the loader
// on a policy's shape: where the loader finds an unknown key, the schema
// reports one at the same YAML path, and where the loader cannot decode a
// list or a mapping into the type a key holds, the schema rejects the
// policy too. Scalars are not compared: YAML 1.1 forms the loader reads
// (0x10, 1_000, yes) look different in the JSON view an editor validates.
func FuzzSchemaRejectsWhatLoaderRejects(f *testing.F) {
	for _, pattern := range []string{root + "/policies/*.yaml", "testdata/invalid/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("version: 1\nserver: [a]\nupstreams: {}\n"))
	f.Add([]byte("upstreams: [{name: a, timeouts: [1], extra: 1}]\n1: x\n"))
	f.Add([]byte("tenants: {tenants: [{keys: [{id: k, nope: {}}]}]}\n"))
	f.Add([]byte("- version\n"))
	s := compile(f, published(f))
	unset := func(string) (string, bool) { return "", false }
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := yamlToJSON(data)
		if err != nil {
			return // no JSON form (aliases, repeated keys, infinities): no verdict to compare
		}
		_, err = config.Parse(data, unset)
		var ps config.Problems
		if !errors.As(err, &ps) {
			return
		}
		verr := s.Validate(v)
		var got map[string]string
		if verr != nil {
			got = schemaProblems(v, verr)
		}
		for _, p := range ps {
			switch {
			case strings.HasPrefix(p.Message, "unknown field"):
				if got[p.Path] == "" {
					t.Errorf("the loader reports %s; the schema reports no problem there (%v)", p, verr)
				}
			case strings.Contains(p.Message, "cannot unmarshal !!seq"), strings.Contains(p.Message, "cannot unmarshal !!map"):
				if verr == nil {
					t.Errorf("the loader reports %s; the schema accepts the policy", p)
				}
			}
		}
	})
}
