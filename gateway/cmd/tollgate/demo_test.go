package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"strings"
	"testing"
)

// The embedded default policy runs the four built-in plugins on demo keys
// made at start: never the same twice, present in the store only as
// hashes.
func TestLoadEmbedded(t *testing.T) {
	a, err := newDemoKeys()
	if err != nil {
		t.Fatal(err)
	}
	b, err := newDemoKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{demoKeyEnv, demoLimitedKeyEnv, demoSpentKeyEnv} {
		if !strings.HasPrefix(a[env], "tg_demo_") || len(a[env]) != len("tg_demo_")+48 || a[env] == b[env] {
			t.Errorf("%s: %q then %q; want two different tg_demo_ keys of 48 hex digits", env, a[env], b[env])
		}
	}
	p, err := loadEmbedded(a)
	if err != nil {
		t.Fatal(err)
	}
	var plugins []string
	for _, pl := range p.Plugins {
		if pl.Builtin != pl.Name || pl.File != "" {
			t.Errorf("plugin %q: builtin %q, file %q; want the built-in of its name", pl.Name, pl.Builtin, pl.File)
		}
		plugins = append(plugins, pl.Name)
	}
	if got := strings.Join(plugins, ","); got != "preflight,ratelimit,budget,holdback" {
		t.Errorf("plugins %s", got)
	}
	tests := []struct {
		tenant, key, env string
	}{
		{"demo", "demo", demoKeyEnv},
		{"demo", "demo-limited", demoLimitedKeyEnv},
		{"demo-spent", "demo-spent", demoSpentKeyEnv},
	}
	found := 0
	for _, tc := range p.Tenants.Tenants {
		for _, k := range tc.Keys {
			for _, tt := range tests {
				if tc.ID != tt.tenant || k.ID != tt.key {
					continue
				}
				found++
				sum := sha256.Sum256([]byte(a[tt.env]))
				if k.KeyEnv != "" || k.KeySHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("%s/%s: key_env %q, key_sha256 %q; want the hash of the made key", tt.tenant, tt.key, k.KeyEnv, k.KeySHA256)
				}
			}
		}
	}
	if found != len(tests) {
		t.Errorf("found %d of the %d demo keys", found, len(tests))
	}
}

func TestPrintDemo(t *testing.T) {
	d := demoKeys{demoKeyEnv: "tg_demo_a", demoLimitedKeyEnv: "tg_demo_b", demoSpentKeyEnv: "tg_demo_c"}
	tests := []struct {
		name string
		addr net.Addr
		url  string
	}{
		{"loopback", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://127.0.0.1:8080/v1/chat/completions"},
		{"every interface", &net.TCPAddr{IP: net.IPv6unspecified, Port: 9000}, "http://127.0.0.1:9000/v1/chat/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			printDemo(&out, tt.addr, d)
			var curls []string
			for _, l := range strings.Split(out.String(), "\n") {
				if l = strings.TrimSpace(l); strings.HasPrefix(l, "curl ") || strings.HasPrefix(l, "for ") {
					curls = append(curls, l)
				}
			}
			want := []string{"Bearer tg_demo_a", "Bearer tg_demo_a' -H 'Content-Type: application/json' -H 'X-Mock-Text:", "Bearer tg_demo_b", "Bearer tg_demo_c"}
			if len(curls) != len(want) {
				t.Fatalf("%d curl lines, want %d:\n%s", len(curls), len(want), out.String())
			}
			for i, w := range want {
				if !strings.Contains(curls[i], w) || !strings.Contains(curls[i], tt.url) {
					t.Errorf("curl line %d lacks %q or %q: %s", i, w, tt.url, curls[i])
				}
			}
		})
	}
}
