package doccheck

import (
	"maps"
	"slices"
	"testing"
)

func TestMakeTargets(t *testing.T) {
	mk := `# comment: not: a rule
GO    ?= go
BIN   := bin
URL = http://x:80
.PHONY: all build
all: build

build:
	$(GO) build ./...
test vet: deps
deps::
	echo a: b
%.wasm: %.go
`
	got := slices.Sorted(maps.Keys(MakeTargets([]byte(mk))))
	want := []string{"%.wasm", "all", "build", "deps", "test", "vet"}
	if !slices.Equal(got, want) {
		t.Errorf("targets %q, want %q", got, want)
	}
}

func TestMakeInvocations(t *testing.T) {
	tests := []struct {
		code string
		want []string
	}{
		{"make run", []string{"run"}},
		{"make run POLICY=policies/keywordguard.yaml", []string{"run"}},
		{"BENCH_PLAN=1 make bench     # print the plan", []string{"bench"}},
		{"make fuzz FUZZTIME=5m", []string{"fuzz"}},
		{"make -C dir build test && make vet", []string{"build", "test", "vet"}},
		{"cd x && make deploycheck; go run .", []string{"deploycheck"}},
		{"b := make([]byte, 4)", nil},
		{"makefile run", nil},
		{"a make here", nil},
		{"scripts/fuzz.sh 20000x   # every target, as make test does", nil},
		{"(cd x; make -f other.mk all)", []string{"all"}},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			if got := MakeInvocations(tt.code); !slices.Equal(got, tt.want) {
				t.Errorf("MakeInvocations(%q) = %q, want %q", tt.code, got, tt.want)
			}
		})
	}
}

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line string
		want Command
	}{
		{"tollgate serve [-policy FILE] [-listen ADDR] [-shutdown-delay D]",
			Command{"tollgate", []string{"serve"}, []string{"policy", "listen", "shutdown-delay"}}},
		{"tollgate validate FILE...", Command{"tollgate", []string{"validate"}, nil}},
		{"tollgate plugin build DIR", Command{"tollgate", []string{"plugin", "build"}, nil}},
		{`tollgate migrate [up\|status\|down-to N]`, Command{"tollgate", []string{"migrate"}, nil}},
		{"tollgate plugin build|test DIR [-o FILE]", Command{"tollgate", []string{"plugin", "build|test"}, []string{"o"}}},
		{"loadgen -url URL -c N -d D [-stream]", Command{"loadgen", nil, []string{"url", "c", "d", "stream"}}},
		{"mockllm [-ttft D] ... --text S", Command{"mockllm", nil, []string{"ttft", "text"}}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got := ParseCommand(tt.line)
			if got.Program != tt.want.Program || !slices.Equal(got.Path, tt.want.Path) || !slices.Equal(got.Flags, tt.want.Flags) {
				t.Errorf("ParseCommand = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestUsagePaths(t *testing.T) {
	usage := `tollgate: an LLM edge gateway

Usage:
  tollgate serve [-policy FILE]     run
  tollgate plugin build|test DIR    plugins
  tollgate migrate [-dsn-env VAR] [up | status | down-to N]    schema
  tollgate plugin test DIR [go test flags]
usage: tollgate keys create -tenant ID
Usage of tollgate:
`
	got := UsagePaths("tollgate", usage)
	want := [][]string{{"serve"}, {"plugin", "build"}, {"plugin", "test"}, {"migrate"},
		{"migrate", "up"}, {"migrate", "status"}, {"migrate", "down-to"}, {"plugin", "test"}, {"keys", "create"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("UsagePaths = %q, want %q", got, want)
	}
	for _, tt := range []struct {
		path []string
		ok   bool
	}{
		{[]string{"serve"}, true},
		{[]string{"plugin"}, true},
		{[]string{"plugin", "test"}, true},
		{[]string{"plugin", "run"}, false},
		{[]string{"migrate", "up"}, true},
		{[]string{"migrate", "down"}, false},
		{[]string{"plugin", "test", "go"}, false},
		{[]string{"keys", "revoke"}, false},
		{[]string{"frob"}, false},
	} {
		if got := listsPath(got, tt.path); got != tt.ok {
			t.Errorf("listsPath(%q) = %v, want %v", tt.path, got, tt.ok)
		}
	}
}
