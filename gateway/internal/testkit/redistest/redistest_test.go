package redistest

import (
	"fmt"
	"strings"
	"testing"
)

func TestStartKillRestart(t *testing.T) {
	s := Start(t)
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Do("GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v", v, err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING answered after Kill")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Do("GET", "k"); err != nil || v != "" {
		t.Fatalf("GET k after restart = %q, %v; want nothing (no persistence)", v, err)
	}
	if _, err := s.Do("NOSUCHCOMMAND"); err == nil {
		t.Fatal("an unknown command did not return an error")
	}
}

// Dump shows every key and every value of every type, including more keys
// than one SCAN reply holds.
func TestDump(t *testing.T) {
	s := Start(t)
	for _, cmd := range [][]string{
		{"SET", "str", "string-value"},
		{"HSET", "h", "field-1", "hash-value"},
		{"RPUSH", "l", "list-a", "list-b"},
		{"SADD", "s", "set-member"},
		{"ZADD", "z", "7", "zset-member"},
		{"XADD", "x", "*", "stream-field", "stream-value"},
	} {
		if _, err := s.Do(cmd...); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	for i := range 1500 {
		if _, err := s.Do("SET", fmt.Sprintf("many:%d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.Dump()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"str (string)\nstring-value\n", "h (hash)\nfield-1\nhash-value\n", "l (list)\nlist-a\nlist-b\n",
		"s (set)\nset-member\n", "z (zset)\nzset-member\n7\n", "stream-field\nstream-value\n",
		"many:0 (string)\nv0\n", "many:1499 (string)\nv1499\n",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Dump lacks %q", want)
		}
	}
	if n := strings.Count(d, " (string)\n"); n != 1501 {
		t.Errorf("Dump shows %d strings, want 1501", n)
	}
}
