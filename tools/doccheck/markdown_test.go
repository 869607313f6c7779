package doccheck

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestSlug(t *testing.T) {
	// Expected values as GitHub renders these headings' anchors.
	tests := []struct{ heading, want string }{
		{"Routing and resilience", "routing-and-resilience"},
		{"How `make bench` measures", "how-make-bench-measures"},
		{"10,000 open streams", "10000-open-streams"},
		{"Where the plugins' 90 µs go, and what one module would save", "where-the-plugins-90-µs-go-and-what-one-module-would-save"},
		{"Rate limits, budget, ledger", "rate-limits-budget-ledger"},
		{"`call_log` and spend_month", "call_log-and-spend_month"},
		{"Streams: what arrives together leaves together", "streams-what-arrives-together-leaves-together"},
		{"A  B", "a--b"},
		{"Tenants & keys (v2)", "tenants--keys-v2"},
		{"[Anthropic upstreams](POLICY.md)", "anthropic-upstreams"},
		{"Trailing hashes ##", "trailing-hashes"},
		{"C# is not closing", "c-is-not-closing"},
	}
	for _, tt := range tests {
		t.Run(tt.heading, func(t *testing.T) {
			if got := Slug(headingText(tt.heading)); got != tt.want {
				t.Errorf("Slug(%q) = %q, want %q", tt.heading, got, tt.want)
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	doc := "# Title\n\n## Usage\n\ntext\n\n```sh\n# not a heading\n```\n\n## Usage\n\n### Usage\n\n" +
		"#no-space is not a heading\n\n<a name=\"legacy\"></a>\n<h2 id=\"html-heading\">x</h2>\n\n`<a name=\"in-code\">`\n"
	got := Anchors([]byte(doc))
	want := []string{"title", "usage", "usage-1", "usage-2", "legacy", "html-heading"}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("anchors %q, want %q", keys, want)
	}
}

func TestLinks(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []Link
	}{
		{"inline and image", "See [a](a.md) and ![b](img/b.png \"title\").\n",
			[]Link{{"a.md", 1}, {"img/b.png", 1}}},
		{"text wraps lines", "one\n[Routing and\nresilience](docs/POLICY.md#routing-and-resilience) x\n",
			[]Link{{"docs/POLICY.md#routing-and-resilience", 2}}},
		{"code span and fence skipped", "`[x](no.md)` and\n\n```md\n[y](no2.md)\n```\n[z](yes.md)\n",
			[]Link{{"yes.md", 6}}},
		{"code text inside a link", "[`policies/`](policies/) done\n", []Link{{"policies/", 1}}},
		{"angle brackets and anchors", "[a](<with space.md>) [b](#local)\n", []Link{{"with space.md", 1}, {"#local", 1}}},
		{"reference definition", "[ref]\n\n[ref]: ../x.md\n", []Link{{"../x.md", 3}}},
		{"escaped bracket", `\[not](a.md)` + "\n", nil},
		{"external", "[go](https://go.dev)\n", []Link{{"https://go.dev", 1}}},
		{"double backticks", "``[x](no.md) ` `` [y](y.md)\n", []Link{{"y.md", 1}}},
		{"unclosed backtick is text", "a ` b [y](y.md)\n", []Link{{"y.md", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Links([]byte(tt.doc)); !slices.Equal(got, tt.want) {
				t.Errorf("Links = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCode(t *testing.T) {
	doc := "Run `make run` first.\n\n~~~sh\nmake bench\n~~~\n\n````\n```\nnested\n````\n"
	var got []Code
	got = append(got, parse([]byte(doc)).code...)
	slices.SortFunc(got, func(a, b Code) int { return a.Line - b.Line })
	want := []Code{{"make run", 1, false}, {"make bench\n", 4, true}, {"```\nnested\n", 8, true}}
	if !slices.Equal(got, want) {
		t.Errorf("code %+v, want %+v", got, want)
	}
}

// FuzzLinks checks Links against properties any input must keep: every
// destination is text of the input, on a line the input has, and never
// comes from inside a code span or fenced block.
func FuzzLinks(f *testing.F) {
	for _, s := range []string{
		"[a](b.md#c)\n", "`[x](y)`", "```\n[x](y)\n```\n[z](w)", "[a\nb](<c d>)", "[r]: x.md",
		"``` `[a](b)` ```", "~~~\n~~~~\n[a](b)", "\\[a](b)", "![i](j 'k')", "[a](b (c))",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		src := []byte(doc)
		lines := bytes.Count(src, []byte("\n")) + 1
		p := parse(src)
		if len(p.prose) != len(src) || bytes.Count(p.prose, []byte("\n")) != lines-1 {
			t.Fatalf("blanking changed the document's length or lines")
		}
		for _, l := range Links(src) {
			if !strings.Contains(doc, l.Dest) {
				t.Errorf("destination %q is not in the input", l.Dest)
			}
			if l.Line < 1 || l.Line > lines {
				t.Errorf("line %d of a %d-line input", l.Line, lines)
			}
			if !bytes.Contains(p.prose, []byte(l.Dest)) && !strings.Contains(l.Dest, " ") {
				t.Errorf("destination %q is not in the document's prose", l.Dest)
			}
		}
		Anchors(src)
	})
}

// FuzzSlug checks that a slug is made only of what GitHub keeps and that
// slugging a slug changes nothing.
func FuzzSlug(f *testing.F) {
	for _, s := range []string{"Routing and resilience", "10,000 open streams", "µs & `code`", "İ", "a_b-c d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, heading string) {
		if !utf8.ValidString(heading) {
			return
		}
		s := Slug(heading)
		for _, r := range s {
			if r != '-' && r != '_' && !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc) {
				t.Fatalf("Slug(%q) = %q holds %q", heading, s, r)
			}
		}
		if again := Slug(s); again != s && strings.ToLower(s) == s {
			t.Fatalf("Slug(Slug(%q)) = %q, not %q", heading, again, s)
		}
	})
}
