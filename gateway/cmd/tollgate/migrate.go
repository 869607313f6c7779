package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

const migrateUsage = `usage: tollgate migrate [-dsn-env VAR] [up | status | down-to VERSION]

Applies the schema in migrations/ (embedded) to the Postgres database whose
connection string is in $TOLLGATE_DATABASE_URL (or the variable -dsn-env names).
`

// migrate runs `tollgate migrate`.
func migrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, migrateUsage) }
	dsnEnv := fs.String("dsn-env", "TOLLGATE_DATABASE_URL", "environment variable holding the connection string")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dsn := os.Getenv(*dsnEnv)
	if dsn == "" {
		fmt.Fprintf(stderr, "tollgate migrate: $%s is not set (it holds the Postgres connection string)\n", *dsnEnv)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := "up"
	if fs.NArg() > 0 {
		cmd = fs.Arg(0)
	}
	switch cmd {
	case "up":
		if err := pg.Migrate(ctx, dsn); err != nil {
			fmt.Fprintf(stderr, "tollgate migrate: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, "schema is up to date")
	case "status":
		states, err := pg.MigrateStatus(ctx, dsn)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate migrate: %v\n", err)
			return 1
		}
		for _, s := range states {
			applied := "pending"
			if s.Applied {
				applied = "applied " + s.AppliedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(stdout, "%05d  %-32s  %s\n", s.Version, s.File, applied)
		}
	case "down-to":
		v, err := strconv.ParseInt(fs.Arg(1), 10, 64)
		if fs.NArg() != 2 || err != nil {
			fs.Usage()
			return 2
		}
		if err := pg.MigrateDownTo(ctx, dsn, v); err != nil {
			fmt.Fprintf(stderr, "tollgate migrate: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "schema is at version %d\n", v)
	default:
		fs.Usage()
		return 2
	}
	return 0
}
