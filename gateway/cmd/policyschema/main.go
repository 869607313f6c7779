// Command policyschema writes the JSON Schema of the policy file, generated
// from the config types and their doc comments (see
// gateway/internal/config/policyschema). `go generate ./policies` runs it to
// refresh policies/policy.schema.json:
//
//	policyschema [-src DIR] [-o FILE]
//
// -src is any directory of the module's source (default: the working
// directory); without -o the schema goes to standard output.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tollgate/tollgate/gateway/internal/config/policyschema"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("policyschema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	src := fs.String("src", ".", "a directory of the module's source, where the doc comments are read")
	out := fs.String("o", "", "write the schema to this file (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "policyschema: unexpected arguments %q\n", fs.Args())
		return 2
	}
	schema, err := policyschema.Generate(*src)
	if err != nil {
		fmt.Fprintf(stderr, "policyschema: %v\n", err)
		return 1
	}
	if *out == "" {
		_, err = stdout.Write(schema)
	} else {
		err = os.WriteFile(*out, schema, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "policyschema: %v\n", err)
		return 1
	}
	return 0
}
