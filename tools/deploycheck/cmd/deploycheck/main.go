// Command deploycheck renders the Tollgate Helm chart as `helm template`
// does and checks the manifests (package deploycheck), for machines without
// helm or a cluster:
//
//	cd tools/deploycheck
//	go run ./cmd/deploycheck -set secrets.databaseURL.existingSecret=db ... > manifests.yaml
//
// The manifests go to stdout, problems to stderr; the exit status is 1 if
// there is any.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate/tollgate/tools/deploycheck"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var sets multi
	chart := flag.String("chart", filepath.Join("..", "..", "deploy", "helm", "tollgate"), "chart directory")
	name := flag.String("name", "tollgate", "release name")
	ns := flag.String("namespace", "default", "namespace")
	quiet := flag.Bool("q", false, "check only; print no manifests")
	flag.Var(&sets, "set", "a value, as helm's --set (repeatable)")
	flag.Parse()

	vals, err := deploycheck.Values(sets...)
	if err != nil {
		fail(err)
	}
	r, err := deploycheck.Render(*chart, deploycheck.Release{Name: *name, Namespace: *ns}, vals)
	if err != nil {
		fail(err)
	}
	if !*quiet {
		for _, f := range r.Names() {
			fmt.Printf("---\n# Source: %s\n%s\n", f, strings.TrimSpace(r.Files[f]))
		}
	}
	objs, err := deploycheck.Decode(r)
	if err != nil {
		fail(err)
	}
	if _, err := deploycheck.CheckChart(objs); err != nil {
		fail(err)
	}
	if err := deploycheck.Lint(*chart, *ns, vals); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "deploycheck: %d manifests ok\n", len(objs))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "deploycheck: %v\n", err)
	os.Exit(1)
}
