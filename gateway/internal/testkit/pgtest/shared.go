package pgtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// DB is a database of its own for one test, on the process-wide server.
type DB struct {
	// Name is the database's name.
	Name string
	dsn  string
}

// DSN returns the URL of the database, as the superuser "postgres".
func (d *DB) DSN() string { return d.dsn }

// Template is a database prepared once per test binary and copied (CREATE
// DATABASE ... TEMPLATE) for each test that asks for it, e.g. one with the
// migrations applied. Declare it as a package-level variable.
type Template struct {
	// Name identifies the template within the process; templates with the
	// same Name are the same database. Letters, digits and '_'.
	Name string
	// Prepare fills the empty database at dsn. It must close every
	// connection it opens before returning: a template with open sessions
	// cannot be copied.
	Prepare func(ctx context.Context, dsn string) error
}

// shared is the process-wide server behind Shared and SharedFrom. Nothing
// stops it: it shuts down when the test binary exits (Pdeathsig), and the
// next binary removes its files.
var shared struct {
	once sync.Once
	srv  *Server
	err  error

	mu        sync.Mutex
	templates map[string]*templateState
	seq       atomic.Int64
}

type templateState struct {
	once sync.Once
	err  error
}

// Shared returns a new, empty database on a server started once per test
// binary, and drops it when the test ends. Tests using Shared are isolated
// from each other and may run in parallel; they must not stop the server, so
// failure drills use Start.
func Shared(t testing.TB) *DB {
	t.Helper()
	return SharedFrom(t, nil)
}

// SharedFrom is Shared with a database copied from tmpl, which is prepared
// on first use. A nil tmpl means an empty database.
func SharedFrom(t testing.TB, tmpl *Template) *DB {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = newServer() })
	if shared.err != nil {
		t.Fatalf("pgtest: starting the shared server: %v", shared.err)
	}
	srv := shared.srv
	source := DatabaseName
	if tmpl != nil {
		var err error
		if source, err = prepareTemplate(srv, tmpl); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	name := fmt.Sprintf("test_%d", shared.seq.Add(1))
	ctx := t.Context()
	if err := srv.exec(ctx, "postgres", "CREATE DATABASE "+name+" TEMPLATE "+pgx.Identifier{source}.Sanitize()); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		// FORCE: a test that leaked a connection must not fail the next.
		if err := srv.exec(context.Background(), "postgres", "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return &DB{Name: name, dsn: srv.dsnFor(name)}
}

// prepareTemplate creates and prepares tmpl's database once and returns its
// name; a failure is remembered and returned to every later caller.
func prepareTemplate(srv *Server, tmpl *Template) (string, error) {
	for _, r := range tmpl.Name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "", fmt.Errorf("template name %q: only letters, digits and '_'", tmpl.Name)
		}
	}
	name := "template_" + tmpl.Name
	shared.mu.Lock()
	if shared.templates == nil {
		shared.templates = make(map[string]*templateState)
	}
	st, ok := shared.templates[name]
	if !ok {
		st = &templateState{}
		shared.templates[name] = st
	}
	shared.mu.Unlock()
	st.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if st.err = srv.exec(ctx, "postgres", "CREATE DATABASE "+name); st.err != nil {
			return
		}
		if err := tmpl.Prepare(ctx, srv.dsnFor(name)); err != nil {
			st.err = fmt.Errorf("preparing template %q: %w", tmpl.Name, err)
			return
		}
		// No connections from now on, so copies never find it busy.
		st.err = srv.exec(ctx, "postgres", "ALTER DATABASE "+name+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false")
	})
	return name, st.err
}

// Migrate applies the gateway's schema to the database at dsn without
// logging each migration: a Template's Prepare for the tests that need the
// schema.
func Migrate(ctx context.Context, dsn string) error { return pg.MigrateLogged(ctx, dsn, nil) }
