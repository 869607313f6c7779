package policyschema

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// typeDoc is what a type's declaration says about it: the type's doc
// comment and each field's (its doc comment, else its line comment).
type typeDoc struct {
	doc    string
	fields map[string]string
}

// sourceDocs reads doc comments from the Go source of the module's own
// packages, one package at a time, as the generator reaches their types.
type sourceDocs struct {
	root   string // the module's directory
	module string // the module path from go.mod
	pkgs   map[string]map[string]typeDoc
}

// newSourceDocs finds the module that holds dir (dir or a parent with a
// go.mod).
func newSourceDocs(dir string) (*sourceDocs, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("locating the module source: %w", err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		module, err := modulePath(filepath.Join(d, "go.mod"))
		if err == nil {
			return &sourceDocs{root: d, module: module, pkgs: map[string]map[string]typeDoc{}}, nil
		}
		if !os.IsNotExist(err) {
			return nil, err
		}
		if filepath.Dir(d) == d {
			return nil, fmt.Errorf("no go.mod in %s or any parent", abs)
		}
	}
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", gomod, err)
	}
	return "", fmt.Errorf("%s declares no module", gomod)
}

// lookup returns the doc of type name in the package at pkgPath. Types
// outside the module (the standard library's) have none.
func (s *sourceDocs) lookup(pkgPath, name string) (typeDoc, error) {
	rel, ok := strings.CutPrefix(pkgPath, s.module)
	if !ok || (rel != "" && rel[0] != '/') {
		return typeDoc{}, nil
	}
	docs, ok := s.pkgs[pkgPath]
	if !ok {
		var err error
		if docs, err = parsePackageDocs(filepath.Join(s.root, filepath.FromSlash(rel))); err != nil {
			return typeDoc{}, fmt.Errorf("reading the doc comments of %s: %w", pkgPath, err)
		}
		s.pkgs[pkgPath] = docs
	}
	return docs[name], nil
}

// parsePackageDocs collects the doc comments of every struct type declared
// in the non-test Go files of dir.
func parsePackageDocs(dir string) (map[string]typeDoc, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	docs := map[string]typeDoc{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				td := typeDoc{doc: commentText(ts.Doc), fields: map[string]string{}}
				if td.doc == "" && len(gd.Specs) == 1 {
					td.doc = commentText(gd.Doc)
				}
				if st, ok := ts.Type.(*ast.StructType); ok {
					for _, fl := range st.Fields.List {
						text := commentText(fl.Doc)
						if text == "" {
							text = commentText(fl.Comment)
						}
						for _, id := range fl.Names {
							td.fields[id.Name] = text
						}
					}
				}
				docs[ts.Name.Name] = td
			}
		}
	}
	return docs, nil
}

// commentText is a comment group as prose: the lines of a paragraph joined
// with spaces, paragraphs apart, and indented (code) lines each on a line of
// its own, so an editor's hover reads as the source does.
func commentText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	var b strings.Builder
	const first, text, code, blank = 0, 1, 2, 3
	prev := first
	for _, line := range strings.Split(g.Text(), "\n") {
		line = strings.TrimRight(line, " \t")
		isCode := strings.HasPrefix(line, "\t")
		switch {
		case line == "":
			if prev != first {
				prev = blank
			}
			continue
		case prev == first:
		case prev == blank:
			b.WriteString("\n\n")
		case isCode || prev == code:
			b.WriteByte('\n')
		default:
			b.WriteByte(' ')
		}
		if isCode {
			b.WriteString("  " + strings.TrimPrefix(line, "\t"))
			prev = code
		} else {
			b.WriteString(line)
			prev = text
		}
	}
	return b.String()
}
