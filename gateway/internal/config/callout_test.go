package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const calloutPlugin = `
plugins:
  - name: mod
    builtin: holdback
`

func TestCallout(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want *Callout
	}{
		{"absent", "", nil, nil},
		{"defaults", "    callout: {allow: [\"http://127.0.0.1:9/v1/moderations\"]}\n", nil,
			&Callout{Allow: []string{"http://127.0.0.1:9/v1/moderations"}, Timeout: 2 * time.Second,
				MaxResponseBytes: 256 << 10, MaxInFlight: 64, EnvValues: map[string]string{}}},
		{"every field", "    callout: {allow: [\"https://api.openai.com/v1/moderations\"], timeout: 500ms, max_response_bytes: 64KiB, max_in_flight: 8, headers_env: {Authorization: MOD_KEY}}\n",
			map[string]string{"MOD_KEY": "Bearer k"},
			&Callout{Allow: []string{"https://api.openai.com/v1/moderations"}, Timeout: 500 * time.Millisecond,
				MaxResponseBytes: 64 << 10, MaxInFlight: 8, HeadersEnv: map[string]string{"Authorization": "MOD_KEY"},
				EnvValues: map[string]string{"MOD_KEY": "Bearer k"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(valid+calloutPlugin+tt.yaml), env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Plugins[0].Callout; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCalloutProblems(t *testing.T) {
	tests := []struct {
		yaml string
		env  map[string]string
		want string
	}{
		{"    callout: {}\n", nil, "plugins[0].callout.allow: needs at least one URL prefix"},
		{"    callout: {allow: [\"ftp://x/\"]}\n", nil, "plugins[0].callout.allow[0]: url \"ftp://x/\": scheme must be http or https"},
		{"    callout: {allow: [\"https://u:p@x/\"]}\n", nil, "plugins[0].callout.allow[0]"},
		{"    callout: {allow: [\"https://x/v1?k=1\"]}\n", nil, "must not carry a query"},
		{"    callout: {allow: [\"https://x/\"], timeout: 2m}\n", nil, "plugins[0].callout.timeout: must be between"},
		{"    callout: {allow: [\"https://x/\"], max_response_bytes: 1GiB}\n", nil, "plugins[0].callout.max_response_bytes"},
		{"    callout: {allow: [\"https://x/\"], max_in_flight: -1}\n", nil, "plugins[0].callout.max_in_flight: must be positive"},
		{"    callout: {allow: [\"https://x/\"], headers_env: {Authorization: MOD_KEY}}\n", nil,
			"plugins[0].callout.headers_env.Authorization: environment variable MOD_KEY is not set"},
		{"    callout: {allow: [\"https://x/\"], headers_env: {Authorization: MOD_KEY}}\n", map[string]string{"MOD_KEY": "a\nb"},
			"the value of MOD_KEY must not contain CR, LF or NUL"},
		{"    callout: {allow: [\"https://x/\"], headers_env: {Host: MOD_KEY}}\n", map[string]string{"MOD_KEY": "x"},
			"plugins[0].callout.headers_env.Host: is a header the host sets itself"},
		{"    callout: {allow: [\"https://x/\"], nope: 1}\n", nil, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := Parse([]byte(valid+calloutPlugin+tt.yaml), env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "a\nb") {
				t.Errorf("the error shows the variable's value")
			}
		})
	}
}
