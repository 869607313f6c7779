package pg_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/tlstest"
)

// TestVerifyFull runs Postgres with ssl=on and a certificate of a CA the
// test makes: with sslmode=verify-full and that CA the migrations and the
// store connect, over TLS; a DSN trusting another CA, or naming a host the
// certificate does not carry, fails with an error that says so.
func TestVerifyFull(t *testing.T) {
	ca := tlstest.NewCA(t, "postgres")
	srvCert := ca.Server(t, "127.0.0.1")
	srv := pgtest.StartTLS(t, srvCert.CertFile, srvCert.KeyFile)
	good := srv.DSNWith("sslmode=verify-full&sslrootcert=" + ca.CertFile)

	if err := pgtest.Migrate(t.Context(), good); err != nil {
		t.Fatalf("migrating over verify-full: %v", err)
	}
	s, err := pg.Open(t.Context(), good)
	if err != nil {
		t.Fatalf("opening over verify-full: %v", err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), good)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var ssl bool
	var version string
	if err := conn.QueryRow(t.Context(), "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl, &version); err != nil {
		t.Fatal(err)
	}
	if !ssl || !strings.HasPrefix(version, "TLSv1.") {
		t.Fatalf("pg_stat_ssl: ssl %v, version %q; want a TLS connection", ssl, version)
	}

	other := tlstest.NewCA(t, "other")
	refused := []struct{ name, dsn, want string }{
		{"another CA", srv.DSNWith("sslmode=verify-full&sslrootcert=" + other.CertFile), "certificate signed by unknown authority"},
		{"a host the certificate does not carry", strings.Replace(good, "127.0.0.1", "localhost", 1), "certificate is not valid for any names"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			s, err := pg.Open(t.Context(), tt.dsn)
			if err == nil {
				s.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "connecting to Postgres at") {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}
