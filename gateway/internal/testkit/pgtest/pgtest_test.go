package pgtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func count(t *testing.T, conn *pgx.Conn, sql string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestStartStopKill: a committed row survives a clean restart and a
// SIGKILL of every postgres process, on the same port.
func TestStartStopKill(t *testing.T) {
	begin := time.Now()
	s := Start(t)
	t.Logf("Start took %v (port %d)", time.Since(begin), s.Port())

	conn := connect(t, s.DSN())
	var db string
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil || db != DatabaseName {
		t.Fatalf("current_database() = %q, %v; want %q", db, err, DatabaseName)
	}
	if _, err := conn.Exec(t.Context(), "CREATE TABLE t (n int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())

	port := s.Port()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := pgx.Connect(t.Context(), s.DSN()); err == nil {
		t.Fatal("connected to a stopped server")
	}
	begin = time.Now()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %v", time.Since(begin))
	if s.Port() != port {
		t.Fatalf("port changed from %d to %d", port, s.Port())
	}
	conn = connect(t, s.DSN())
	if _, err := conn.Exec(t.Context(), "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, "SELECT count(*) FROM t"); n != 2 {
		t.Fatalf("after restart: %d rows, want 2", n)
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(t.Context()); err == nil {
		t.Fatal("a session survived Kill")
	}
	begin = time.Now()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("start after kill (crash recovery) took %v", time.Since(begin))
	conn = connect(t, s.DSN())
	if n := count(t, conn, "SELECT count(*) FROM t"); n != 2 {
		t.Fatalf("after kill: %d rows, want 2 (the committed ones)", n)
	}
}

var withTable = &Template{
	Name: "with_table",
	Prepare: func(ctx context.Context, dsn string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE seeded (n int); INSERT INTO seeded VALUES (1), (2), (3)")
		return err
	},
}

// TestShared: every call gets its own database; copies of a template hold
// its data and do not see each other's writes.
func TestShared(t *testing.T) {
	begin := time.Now()
	a := Shared(t)
	t.Logf("first Shared took %v", time.Since(begin))
	begin = time.Now()
	b := SharedFrom(t, withTable)
	c := SharedFrom(t, withTable)
	t.Logf("two SharedFrom took %v", time.Since(begin))
	if a.Name == b.Name || b.Name == c.Name {
		t.Fatalf("databases not distinct: %q %q %q", a.Name, b.Name, c.Name)
	}

	connA, connB, connC := connect(t, a.DSN()), connect(t, b.DSN()), connect(t, c.DSN())
	if n := count(t, connA, "SELECT count(*) FROM pg_tables WHERE tablename = 'seeded'"); n != 0 {
		t.Fatalf("empty database has the template's table")
	}
	if _, err := connB.Exec(t.Context(), "DELETE FROM seeded"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, connB, "SELECT count(*) FROM seeded"); n != 0 {
		t.Fatalf("b: %d rows after DELETE", n)
	}
	if n := count(t, connC, "SELECT count(*) FROM seeded"); n != 3 {
		t.Fatalf("c: %d rows, want the template's 3", n)
	}
}

// TestSharedDropsDatabase: the database of a finished test is gone.
func TestSharedDropsDatabase(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) { name = Shared(t).Name })
	admin := connect(t, shared.srv.dsnFor("postgres"))
	var n int
	if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test", name)
	}
}

// TestMissingBinaries: without Postgres, the error says how to install it.
func TestMissingBinaries(t *testing.T) {
	t.Setenv("PGTEST_BIN_DIR", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	_, err := locate(t.TempDir() + "/*/bin")
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y postgresql") {
		t.Fatalf("locate without Postgres: %v; want an error saying how to install it", err)
	}
	t.Log(err)
}
