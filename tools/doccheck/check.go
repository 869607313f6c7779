package doccheck

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Problem is one thing a document says that the repository contradicts.
type Problem struct {
	File string // slash path from the repository root
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// Help runs a program with args and returns what it printed, stdout and
// stderr together. A non-zero exit is not an error: programs asked for
// help often exit 2.
type Help func(args ...string) (string, error)

// Repo is a repository to check and what its documents are checked
// against.
type Repo struct {
	Root     string
	Docs     []string // Markdown files, slash paths from Root; every one is link-checked and make-checked
	Readme   string   // the document whose Commands table is checked, e.g. "README.md"
	Makefile string   // e.g. "Makefile"
	// Programs are the programs the repository builds, by name, each with a
	// way to ask it for help.
	Programs map[string]Help

	anchors map[string]map[string]bool // by target file
}

// Check runs every check and returns the problems found, by file and line.
// An error means a check could not run (a file unreadable, a program that
// would not start), not that a document is wrong.
func (r *Repo) Check() ([]Problem, error) {
	mk, err := os.ReadFile(filepath.Join(r.Root, r.Makefile))
	if err != nil {
		return nil, fmt.Errorf("reading the Makefile: %w", err)
	}
	targets := MakeTargets(mk)
	tests, err := TestNames(r.Root)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	for _, doc := range r.Docs {
		src, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(doc)))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", doc, err)
		}
		problems = append(problems, r.checkLinks(doc, src)...)
		problems = append(problems, checkMake(doc, src, targets)...)
		problems = append(problems, checkTestNames(doc, src, tests)...)
		skip := map[int]bool{}
		if doc == r.Readme {
			for _, row := range commandRows(src) {
				skip[row.line] = true
			}
		}
		ps, err := r.checkCodeCommands(doc, src, skip)
		if err != nil {
			return nil, err
		}
		problems = append(problems, ps...)
		if doc == r.Readme {
			ps, err := r.checkCommands(doc, src)
			if err != nil {
				return nil, err
			}
			problems = append(problems, ps...)
		}
	}
	slices.SortStableFunc(problems, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	return problems, nil
}

// scheme matches a URL with a scheme (https:, mailto:): not a file link.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func (r *Repo) checkLinks(doc string, src []byte) []Problem {
	var problems []Problem
	for _, l := range Links(src) {
		if msg := r.checkLink(doc, l.Dest); msg != "" {
			problems = append(problems, Problem{File: doc, Line: l.Line, Msg: msg})
		}
	}
	return problems
}

// checkLink resolves dest as GitHub does from doc's page and returns what
// is wrong with it, or "".
func (r *Repo) checkLink(doc, dest string) string {
	if dest == "" {
		return "empty link"
	}
	if scheme.MatchString(dest) || strings.HasPrefix(dest, "//") {
		return ""
	}
	p, frag, _ := strings.Cut(dest, "#")
	p, _, _ = strings.Cut(p, "?")
	p, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Sprintf("link %q: %v", dest, err)
	}
	target := doc
	switch {
	case strings.HasPrefix(p, "/"):
		target = path.Clean(strings.TrimPrefix(p, "/"))
	case p != "":
		target = path.Join(path.Dir(doc), p)
	}
	if target == ".." || strings.HasPrefix(target, "../") {
		return fmt.Sprintf("link %q leaves the repository", dest)
	}
	st, err := os.Stat(filepath.Join(r.Root, filepath.FromSlash(target)))
	if err != nil {
		return fmt.Sprintf("link %q: %s does not exist", dest, target)
	}
	if frag == "" || st.IsDir() || !strings.HasSuffix(strings.ToLower(target), ".md") {
		return ""
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	anchors, err := r.anchorsOf(target)
	if err != nil {
		return fmt.Sprintf("link %q: %v", dest, err)
	}
	if !anchors[frag] {
		return fmt.Sprintf("link %q: %s has no heading with the anchor #%s", dest, target, frag)
	}
	return ""
}

func (r *Repo) anchorsOf(target string) (map[string]bool, error) {
	if a, ok := r.anchors[target]; ok {
		return a, nil
	}
	src, err := os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(target)))
	if err != nil {
		return nil, err
	}
	if r.anchors == nil {
		r.anchors = map[string]map[string]bool{}
	}
	r.anchors[target] = Anchors(src)
	return r.anchors[target], nil
}

// checkMake reports every `make TARGET` in the document's code that the
// Makefile has no rule for.
func checkMake(doc string, src []byte, targets map[string]bool) []Problem {
	var problems []Problem
	for _, c := range parse(src).code {
		for _, t := range MakeInvocations(c.Text) {
			if !targets[t] {
				problems = append(problems, Problem{File: doc, Line: c.Line,
					Msg: fmt.Sprintf("`make %s`: the Makefile has no target %q", t, t)})
			}
		}
	}
	return problems
}

// DocFiles returns the Markdown files under root as slash paths, sorted,
// leaving out test data, installed packages and build output.
func DocFiles(root string) ([]string, error) {
	var docs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", "bin", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the documents: %w", err)
	}
	slices.Sort(docs)
	return docs, nil
}
