// Package migrations holds Tollgate's Postgres schema as numbered goose SQL
// migrations, embedded so the one binary can apply them (`tollgate migrate`,
// through store/pg.Migrate). See README.md for the tables and conventions.
package migrations

import "embed"

// FS holds the migration files (NNNNN_name.sql, goose format) at its root.
//
//go:embed *.sql
var FS embed.FS
