// Package pgtest runs a real Postgres for tests: initdb into a temporary
// directory and a postgres listening on a free loopback port, which a test
// can stop, restart and kill for failure drills.
//
// Start gives a test its own server (use it to Stop/Start/Kill); Shared gives
// a test a fresh database on one server per test binary, which is cheaper.
// Both fail the test, never skip it, when Postgres is not installed.
//
// The binaries are found in $PGTEST_BIN_DIR, else beside the initdb in PATH,
// else in the newest /usr/lib/postgresql/*/bin. Running as root, postgres
// runs as the OS user "postgres", since initdb refuses root. initdb runs once
// per machine: its output is kept in os.TempDir() and copied for each server.
// Directories under os.TempDir() named tollgate-pgtest-<pid>-* belong to the
// test binary <pid> and are removed by the next one once it has exited.
//
// Durability is traded for speed (fsync=off, full_page_writes=off): a crash
// of the machine would lose data, a crash of postgres (Kill) does not lose a
// committed transaction (synchronous_commit stays on; without fsync a commit
// costs one write to the page cache).
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DatabaseName is the database Start creates on a new server.
const DatabaseName = "tollgate"

// startTimeout bounds how long postgres may take to accept connections.
const startTimeout = 30 * time.Second

// Server is a postgres process owned by a test. Its methods are safe for
// concurrent use.
type Server struct {
	dir     string // temporary directory: data/, the unix socket, postgres.log
	port    int
	install *install
	ssl     []string // -c settings serving TLS (StartTLS); nil: none

	mu   sync.Mutex
	proc *process // nil while stopped
}

// Start initializes a data directory and starts postgres on a free port of
// 127.0.0.1 with a database named DatabaseName, and stops it and removes its
// files when the test ends. It fails the test if Postgres is not installed
// or does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	return owned(t)
}

// StartTLS is Start with ssl=on, serving the certificate and key in
// certFile and keyFile (PEM; copied into the server's directory, readable
// only by the user postgres runs as, as postgres demands). Connections
// without TLS are still accepted, so the DSN of DSN (sslmode=disable)
// keeps working; TLSPort's DSNs are for the clients under test.
func StartTLS(t testing.TB, certFile, keyFile string) *Server {
	t.Helper()
	return owned(t, func(s *Server) error {
		dst := map[string]string{certFile: filepath.Join(s.dir, "server.crt"), keyFile: filepath.Join(s.dir, "server.key")}
		for src, to := range dst {
			if err := copyFile(src, to, 0o600); err != nil {
				return fmt.Errorf("copying %s: %w", src, err)
			}
			if err := chownToRunner(to, s.install.cred); err != nil {
				return err
			}
		}
		s.ssl = []string{"-c", "ssl=on", "-c", "ssl_cert_file=" + dst[certFile], "-c", "ssl_key_file=" + dst[keyFile]}
		return nil
	})
}

// owned starts a server (newServer with prepare), failing t if it does not
// start, and stops it and removes its files when t ends.
func owned(t testing.TB, prepare ...func(*Server) error) *Server {
	t.Helper()
	s, err := newServer(prepare...)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: stopping postgres: %v", err)
		}
		if err := os.RemoveAll(s.dir); err != nil {
			t.Errorf("pgtest: removing %s: %v", s.dir, err)
		}
	})
	return s
}

// DSNWith returns the URL of the DatabaseName database with the given
// query parameters (e.g. "sslmode=verify-full&sslrootcert=/ca.pem")
// instead of sslmode=disable.
func (s *Server) DSNWith(query string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?%s", s.port, DatabaseName, query)
}

// newServer prepares a data directory and starts postgres with a database
// named DatabaseName; prepare (optional) runs before the first start. On
// error it leaves nothing running.
func newServer(prepare ...func(*Server) error) (*Server, error) {
	in, err := findInstall()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", tempPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory: %w", err)
	}
	s := &Server{dir: dir, install: in}
	for _, f := range prepare {
		if err := f(s); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.setUp(); err != nil {
		_ = s.Kill()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) setUp() error {
	if err := chownToRunner(s.dir, s.install.cred); err != nil {
		return err
	}
	if err := s.install.copyCluster(s.dataDir()); err != nil {
		return err
	}
	// A port found free may be taken before postgres binds it; try again
	// with another.
	var err error
	for range 3 {
		if s.port, err = freePort(); err != nil {
			return err
		}
		if err = s.Start(); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return s.exec(ctx, "postgres", "CREATE DATABASE "+DatabaseName)
}

// DSN returns the URL of the DatabaseName database, as the superuser
// "postgres" (no password).
func (s *Server) DSN() string { return s.dsnFor(DatabaseName) }

func (s *Server) dsnFor(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Port returns the TCP port postgres listens on; it stays the same across
// Stop and Start.
func (s *Server) Port() int { return s.port }

// LogPath returns the file postgres writes its log to.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "postgres.log") }

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// Start starts postgres again after Stop or Kill, on the same port and data
// directory, and returns once it accepts connections. Starting a running
// server is a no-op.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		select {
		case <-s.proc.done:
		default:
			return nil
		}
	}
	logFile, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the postgres log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(s.install.postgres, append([]string{
		"-D", s.dataDir(),
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + s.dir,
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=100",
		"-c", "log_min_messages=warning",
	}, s.ssl...)...)
	cmd.Dir = s.dir
	cmd.Env = []string{"LC_ALL=C", "LANG=C", "PATH=/usr/bin:/bin"}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: s.install.cred,
		// Own process group, so a Ctrl-C meant for `go test` does not
		// reach postgres before the test's cleanup does.
		Setpgid: true,
		// SIGQUIT (immediate shutdown) when the test binary exits without
		// stopping the server, e.g. the process-wide Shared one.
		Pdeathsig: syscall.SIGQUIT,
	}
	p, err := spawn(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", s.install.postgres, err)
	}
	s.proc = p
	if err := s.waitReady(p); err != nil {
		_ = p.kill()
		s.proc = nil
		return err
	}
	return nil
}

// waitReady polls until postgres accepts connections, the process exits or
// startTimeout passes.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.dsnFor("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited while starting (%v); log %s:\n%s", p.err, s.LogPath(), tail(s.LogPath()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %v: %v; log %s:\n%s", startTimeout, err, s.LogPath(), tail(s.LogPath()))
		}
	}
}

// Stop shuts postgres down ("fast" mode: open sessions are disconnected) and
// waits for it to exit. Stopping a stopped server is a no-op.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(startTimeout):
		err := p.kill()
		return fmt.Errorf("postgres did not stop within %v; killed it: %w", startTimeout, err)
	}
	s.proc = nil
	return nil
}

// Kill sends SIGKILL to the postmaster and every backend at once, as in a
// crash, and waits until they are gone. The next Start runs crash recovery.
// Killing a stopped server is a no-op.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	return p.kill()
}

// exec runs sql on database db as the superuser.
func (s *Server) exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, s.dsnFor(db))
	if err != nil {
		return fmt.Errorf("connecting to database %s: %w", db, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
