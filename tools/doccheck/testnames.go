package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// testFunc matches the declaration of a test, fuzz target, benchmark or
// example in a _test.go file.
var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)

// TestNames returns the names of every test, fuzz target, benchmark and
// example declared in a _test.go file under root (test data, installed
// packages and build output left out).
func TestNames(root string) (map[string]bool, error) {
	names := map[string]bool{}
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
		if !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the tests: %w", err)
	}
	return names, nil
}

// testRef is an inline code span that names a test, fuzz target or
// benchmark, with an optional sub-test or -run pattern after a slash.
var testRef = regexp.MustCompile(`^((?:Test|Fuzz|Benchmark)[A-Z]\w*)(?:/\S*)?$`)

// checkTestNames reports every inline code span of the document that names
// a test, fuzz target or benchmark no _test.go declares. A name that is the
// start of declared ones (TestDrill, as a -run prefix) counts as declared.
func checkTestNames(doc string, src []byte, names map[string]bool) []Problem {
	var problems []Problem
	for _, c := range parse(src).code {
		m := testRef.FindStringSubmatch(c.Text)
		if c.Fenced || m == nil || names[m[1]] || prefixOfAny(m[1], names) {
			continue
		}
		problems = append(problems, Problem{File: doc, Line: c.Line,
			Msg: fmt.Sprintf("`%s`: no _test.go declares %s", c.Text, m[1])})
	}
	return problems
}

func prefixOfAny(prefix string, names map[string]bool) bool {
	for n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}
