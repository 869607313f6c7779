package pg

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/tollgate/tollgate/migrations"
)

// Migrate applies the pending migrations of the embedded schema
// (migrations.FS) to the database at dsn, logging each with slog, then
// ensures the call_log partitions of the current and the next month. Several
// processes may migrate at once: goose serializes them with an advisory
// lock. An error names the migration that failed; the migrations before it
// stay applied (each runs in its own transaction).
func Migrate(ctx context.Context, dsn string) error {
	return MigrateLogged(ctx, dsn, slog.Default())
}

// MigrateLogged is Migrate logging to log; nil logs nothing (the tests,
// which migrate a database for each package and template).
func MigrateLogged(ctx context.Context, dsn string, log *slog.Logger) error {
	p, db, err := newMigrator(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	results, err := p.Up(ctx)
	for _, r := range results {
		if r.Error == nil && log != nil {
			log.InfoContext(ctx, "applied migration", "version", r.Source.Version,
				"file", path.Base(r.Source.Path), "duration", r.Duration)
		}
	}
	if err != nil {
		return fmt.Errorf("applying migrations: %w", err)
	}
	now := time.Now()
	for _, month := range []time.Time{MonthStart(now), MonthStart(now).AddDate(0, 1, 0)} {
		if _, err := db.ExecContext(ctx, ensurePartitionSQL, month.Format(time.DateOnly)); err != nil {
			return fmt.Errorf("ensuring the call_log partition of %s: %w", month.Format("2006-01"), err)
		}
	}
	return nil
}

// MigrateDownTo rolls the schema back to version (0: empty), newest first.
// It destroys data: it is for tests and for undoing a bad deploy by hand.
func MigrateDownTo(ctx context.Context, dsn string, version int64) error {
	p, db, err := newMigrator(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	results, err := p.DownTo(ctx, version)
	for _, r := range results {
		if r.Error == nil {
			slog.InfoContext(ctx, "rolled back migration", "version", r.Source.Version,
				"file", path.Base(r.Source.Path), "duration", r.Duration)
		}
	}
	if err != nil {
		return fmt.Errorf("rolling back migrations to version %d: %w", version, err)
	}
	return nil
}

// MigrationState is one embedded migration and whether it is applied.
type MigrationState struct {
	Version   int64
	File      string    // e.g. "00001_tenants.sql"
	Applied   bool      //
	AppliedAt time.Time // zero if not applied
}

// MigrateStatus lists the embedded migrations, oldest first, with whether
// each is applied to the database at dsn.
func MigrateStatus(ctx context.Context, dsn string) ([]MigrationState, error) {
	p, db, err := newMigrator(dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	statuses, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the migration status: %w", err)
	}
	out := make([]MigrationState, len(statuses))
	for i, st := range statuses {
		out[i] = MigrationState{
			Version:   st.Source.Version,
			File:      path.Base(st.Source.Path),
			Applied:   st.State == goose.StateApplied,
			AppliedAt: st.AppliedAt,
		}
	}
	return out, nil
}

// newMigrator returns a goose provider on the embedded migrations and the
// database/sql handle it uses, which the caller closes.
func newMigrator(dsn string) (*goose.Provider, *sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the Postgres DSN: %w", err)
	}
	// A 1 s probe (goose's default is 5 s) so that a gateway waiting for
	// another one's migration starts soon after it ends; 300 probes.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, nil, fmt.Errorf("creating the migration lock: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("loading the embedded migrations: %w", err)
	}
	return p, db, nil
}
