package limiter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// hashTag is the part of key Redis Cluster hashes to find its slot: the
// text between the first '{' and the first '}' after it, if not empty;
// otherwise the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

func TestKeysOfARequestShareAHashTag(t *testing.T) {
	limits := []Limit{
		{Key: "t", RPM: 1, TPM: 1},
		{Key: "k:key-1", RPM: 1},
		{Key: "m:key-1:{gpt-4o}", TPM: 1},
		{Key: "}{", RPM: 1, TPM: 1},
		{Key: "{}", RPM: 1},
	}
	tests := []struct {
		tenant, tag string
	}{
		{"acme", "acme"},
		{"ünïcode", "ünïcode"},
		{"a b", "a b"},
		{"{acme}", "#" + sha256Hex("{acme}")},
		{"acme}", "#" + sha256Hex("acme}")},
		{"{", "#" + sha256Hex("{")},
		{"}", "#" + sha256Hex("}")},
		{"#acme", "#" + sha256Hex("#acme")}, // never the hash of another tenant
		{"#" + sha256Hex("{acme}"), "#" + sha256Hex("#"+sha256Hex("{acme}"))},
	}
	tags := map[string]string{}
	for _, tt := range tests {
		var c redisCall
		c.plan.build(limits, 1, 1)
		c.prepare(DefaultPrefix, tt.tenant, limits, true)
		if len(c.keys) != 7 || len(c.args) != 14 {
			t.Fatalf("tenant %q: %d keys and %d args, want 7 and 14", tt.tenant, len(c.keys), len(c.args))
		}
		for _, k := range c.keys {
			if got := hashTag(k); got != tt.tag {
				t.Fatalf("tenant %q: key %q hashes by %q, want %q", tt.tenant, k, got, tt.tag)
			}
			if !strings.HasPrefix(k, DefaultPrefix+"{"+tt.tag+"}:") {
				t.Fatalf("tenant %q: key %q", tt.tenant, k)
			}
		}
		if other, dup := tags[tt.tag]; dup {
			t.Fatalf("tenants %q and %q share the tag %q", other, tt.tenant, tt.tag)
		}
		tags[tt.tag] = tt.tenant
	}
}

func TestPrepareArgs(t *testing.T) {
	limits := []Limit{{Key: "t", RPM: 100}, {Key: "off"}, {Key: "k", TPM: 1000}}
	var c redisCall
	c.plan.build(limits, 10, 1)
	c.prepare("p:", "acme", limits, true)
	wantKeys := []string{"p:{acme}:t:r", "p:{acme}:k:t"}
	wantArgs := []string{"600000", "60000000", "600000", "60000000"}
	if strings.Join(c.keys, " ") != strings.Join(wantKeys, " ") || strings.Join(c.args, " ") != strings.Join(wantArgs, " ") {
		t.Fatalf("keys %q args %q; want %q %q", c.keys, c.args, wantKeys, wantArgs)
	}
	c.keys, c.args = c.keys[:0], c.args[:0]
	c.plan.buildAdjust(limits, -10, 1)
	c.prepare("p:", "acme", limits, false)
	if strings.Join(c.keys, " ") != "p:{acme}:k:t" || strings.Join(c.args, " ") != "-600000" {
		t.Fatalf("adjust: keys %q args %q", c.keys, c.args)
	}
}

func TestNewRedisRejectsBracesInPrefix(t *testing.T) {
	c, err := redisx.New(redisx.Options{Addrs: []string{"127.0.0.1:1"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "brace") {
			t.Fatalf("NewRedis with a brace in the prefix: panic %v, want one about the brace", p)
		}
	}()
	NewRedis(c, RedisOptions{Prefix: "a{b}:"})
}
