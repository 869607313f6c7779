package doccheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// root is the repository root (this package is tools/doccheck).
var root = func() string {
	abs, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return abs
}()

// built holds the repository's programs, built once for every test that
// asks them for help.
var built struct {
	once     sync.Once
	dir      string
	programs map[string]Help
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func programs(t *testing.T) map[string]Help {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "doccheck-bin")
		if built.err == nil {
			built.programs, built.err = BuildPrograms(root, built.dir)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.programs
}

// TestRepository checks this repository's documents: links and anchors,
// make targets, and the README's command table against the built programs.
func TestRepository(t *testing.T) {
	docs, err := DocFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"README.md", "deploy/README.md", "docs/BENCHMARKS.md", "docs/SCALING.md", "docs/POLICY.md"} {
		if !slices.Contains(docs, want) {
			t.Errorf("DocFiles left out %s (found %q)", want, docs)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The checks below pass vacuously if the README's table or links stop
	// being found: make sure they are.
	if rows := commandRows(readme); len(rows) < 8 {
		t.Errorf("found %d rows in the README's command table, want at least 8", len(rows))
	}
	if links := Links(readme); len(links) < 10 {
		t.Errorf("found %d links in the README, want at least 10", len(links))
	}
	r := &Repo{Root: root, Docs: docs, Readme: "README.md", Makefile: "Makefile", Programs: programs(t)}
	problems, err := r.Check()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckCatches runs the checks on small repositories whose documents
// are wrong in one way each, against the real programs.
func TestCheckCatches(t *testing.T) {
	const makefile = ".PHONY: run test\nrun:\n\tgo run .\ntest: vet\nvet:\n\tgo vet ./...\n"
	const table = "## Commands\n\n| command | |\n|---|---|\n"
	tests := []struct {
		name  string
		files map[string]string
		want  []string // one substring per expected problem, in order
	}{
		{
			name: "all good",
			files: map[string]string{
				"README.md": "# T\n\nSee [docs](docs/A.md#usage-and-flags), [dir](docs/), [self](#commands),\n" +
					"[ext](https://example.com/x.md#nope) and [anchor-less](docs/A.md).\n\n" + table +
					"| `tollgate serve [-policy FILE] [-listen ADDR]` | runs |\n" +
					"| `tollgate plugin build DIR [-o FILE]` / `tollgate plugin test DIR` | plugins |\n" +
					"| `tollgate migrate [up\\|status\\|down-to N]` | schema |\n" +
					"| `tollgate keys create -tenant ID [-rpm N]` | keys |\n" +
					"| `mockllm [-ttft D] [-tokens N] ...` | mock |\n" +
					"| `loadgen -url URL -c N -d D [-stream]` | load |\n" +
					"| `make run POLICY=x.yaml` | run |\n",
				"docs/A.md": "# A\n\n## Usage and flags\n\n[back](../README.md#t) `make test` and\n```sh\nmake vet\n```\n",
				"Makefile":  makefile,
			},
		},
		{
			name: "broken links",
			files: map[string]string{
				"README.md": "# T\n\n[gone](docs/Gone.md) [bad anchor](docs/A.md#no-such-heading)\n[self](#nope)\n" +
					"[outside](../../etc/passwd)\n\n" + table + "| `make run` | |\n",
				"docs/A.md": "# A\n\n```\n## In code, not a heading\n```\n[code anchor](#in-code-not-a-heading)\n",
				"Makefile":  makefile,
			},
			want: []string{
				`README.md:3: link "docs/Gone.md": docs/Gone.md does not exist`,
				`README.md:3: link "docs/A.md#no-such-heading": docs/A.md has no heading with the anchor #no-such-heading`,
				`README.md:4: link "#nope": README.md has no heading`,
				`README.md:5: link "../../etc/passwd" leaves the repository`,
				`docs/A.md:6: link "#in-code-not-a-heading": docs/A.md has no heading`,
			},
		},
		{
			name: "missing make targets",
			files: map[string]string{
				"README.md": "# T\n\nRun `make bench` or `BENCH_QUICK=1 make benchmark`.\n\n" + table +
					"| `make run` | |\n| `make drills` | |\n",
				"docs/A.md": "```sh\nmake test && make deploycheck\n```\n",
				"Makefile":  makefile,
			},
			want: []string{
				"README.md:3: `make bench`: the Makefile has no target \"bench\"",
				"README.md:3: `make benchmark`",
				"README.md:10: `make drills`",
				"docs/A.md:2: `make deploycheck`",
			},
		},
		{
			name: "missing subcommands, programs and flags",
			files: map[string]string{
				"README.md": "# T\n\n" + table +
					"| `tollgate frobnicate FILE` | |\n" +
					"| `tollgate plugin lint DIR` | |\n" +
					"| `tollgate keys create\\|rotate` | |\n" +
					"| `tollgate serve [-policy FILE] [-port N]` | |\n" +
					"| `mockllm [-ttft D] [-latency D]` | |\n" +
					"| `tollgated serve` | |\n",
				"Makefile": makefile,
			},
			want: []string{
				`README.md:7: ` + "`tollgate frobnicate FILE`" + `: tollgate's usage lists no subcommand "frobnicate"`,
				`README.md:8: ` + "`tollgate plugin lint DIR`" + `: tollgate's usage lists no subcommand "plugin lint"`,
				`tollgate's usage lists no subcommand "keys rotate"`,
				"tollgate serve's help shows no flag -port",
				"mockllm's help shows no flag -latency",
				`"tollgated" is not a program the repository builds`,
			},
		},
		{
			name: "commands in other code",
			files: map[string]string{
				"README.md": "# T\n\n" + table + "| `make run` | |\n",
				"docs/A.md": "Run `tollgate serve -listen ADDR` or `tollgate serve -port 80`.\n\n```sh\n" +
					"X=1 bin/loadgen -url U -c 8 -d 10s   # a -fake flag in a comment\n" +
					"tollgate validate FILE && bin/mockllm -ttft 1s -speed 2\n" +
					"tollgate migrate up; tollgate migrate sideways\n" +
					"tollgate_inflight_requests and makefile and mockllmx -nope\n```\n",
				"Makefile": makefile,
			},
			want: []string{
				"docs/A.md:1: `tollgate serve -port 80`: tollgate serve's help shows no flag -port",
				"docs/A.md:5: `mockllm -ttft 1s -speed 2`: mockllm's help shows no flag -speed",
				`docs/A.md:6: ` + "`tollgate migrate sideways`" + `: tollgate's usage lists no subcommand "migrate sideways"`,
			},
		},
		{
			name: "tests that do not exist",
			files: map[string]string{
				"README.md": "# T\n\n" + table + "| `make run` | |\n",
				"docs/A.md": "`TestThere` `TestTher` `BenchmarkThere/cold` `FuzzThere`\n" +
					"`TestGone` and `BenchmarkGone/warm`, `TestThere…` is prose\n\n```go\nfunc TestExample(t *testing.T) {}\n```\n",
				"x/a_test.go":          "package x\n\nfunc TestThere(t *testing.T) {}\nfunc BenchmarkThere(b *testing.B) {}\nfunc FuzzThere(f *testing.F) {}\n",
				"x/testdata/b_test.go": "package x\n\nfunc TestGone(t *testing.T) {}\n",
				"Makefile":             makefile,
			},
			want: []string{
				"docs/A.md:2: `TestGone`: no _test.go declares TestGone",
				"docs/A.md:2: `BenchmarkGone/warm`: no _test.go declares BenchmarkGone",
			},
		},
		{
			name: "no command table",
			files: map[string]string{
				"README.md": "# T\n\n## Usage\n\n| a | b |\n|---|---|\n| `tollgate serve` | |\n",
				"Makefile":  makefile,
			},
			want: []string{`README.md:1: no command table`},
		},
	}
	progs := programs(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var docs []string
			for name, text := range tt.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			docs, err := DocFiles(dir)
			if err != nil {
				t.Fatal(err)
			}
			r := &Repo{Root: dir, Docs: docs, Readme: "README.md", Makefile: "Makefile", Programs: progs}
			problems, err := r.Check()
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != len(tt.want) {
				t.Errorf("%d problems, want %d:", len(problems), len(tt.want))
				for _, p := range problems {
					t.Log(p)
				}
			}
			for i, w := range tt.want {
				if i < len(problems) && !strings.Contains(problems[i].String(), w) {
					t.Errorf("problem %d is %q, want it to contain %q", i, problems[i], w)
				}
			}
		})
	}
}

// TestBenchmarksOpensWithTable checks the layout `make bench` relies on and
// readers are promised: docs/BENCHMARKS.md's first section is the latest
// report, one block between the markers that `loadgen report -into`
// replaces (gateway/internal/testkit/loadgen, MarkerBegin and MarkerEnd),
// and the history lives on its own page.
func TestBenchmarksOpensWithTable(t *testing.T) {
	const begin, end = "<!-- make-bench:begin -->", "<!-- make-bench:end -->"
	src, err := os.ReadFile(filepath.Join(root, "docs", "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	if n, m := strings.Count(doc, begin), strings.Count(doc, end); n != 1 || m != 1 {
		t.Fatalf("%d begin and %d end markers, want one each", n, m)
	}
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if j < i {
		t.Fatal("the end marker comes before the begin marker")
	}
	first := strings.Index(doc, "\n## ")
	if first < 0 || !strings.HasPrefix(doc[first+1:], "## Latest `make bench`\n\n"+begin) {
		t.Errorf("the first section is not \"## Latest `make bench`\" opening with the report block")
	}
	if !strings.Contains(doc, "](BENCHMARKS-HISTORY.md)") {
		t.Error("no link to BENCHMARKS-HISTORY.md")
	}
}
