// Package redistest runs a real redis-server for tests: on a free port of
// 127.0.0.1, with no persistence, owned by the test that started it. Tests
// can stop, kill and restart it on the same port to drill failures.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// installHint is how to get what is missing.
const installHint = "install Redis: apt-get install -y redis-server (or set REDISTEST_BIN to a redis-server binary)"

// startTimeout bounds how long redis-server may take to answer PING.
const startTimeout = 15 * time.Second

// Server is a redis-server process owned by a test. Its methods are safe for
// concurrent use.
type Server struct {
	bin  string
	dir  string
	port int
	args []string

	mu   sync.Mutex
	proc *process // nil while stopped
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary returns the redis-server the package runs, or an error that says
// how to install one.
func Binary() (string, error) {
	if b := os.Getenv("REDISTEST_BIN"); b != "" {
		return b, nil
	}
	for _, p := range []string{"redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("redis-server not found; %s", installHint)
}

// Start starts redis-server on a free port and stops it when the test ends.
// Extra arguments are passed to redis-server as config directives, e.g.
// "--maxmemory", "10mb". It fails the test if Redis is not installed or does
// not start.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	dir, err := os.MkdirTemp("", "tollgate-redistest-")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s := &Server{bin: bin, dir: dir, port: port, args: args}
	t.Cleanup(func() {
		_ = s.Kill()
		_ = os.RemoveAll(dir)
	})
	if err := s.Start(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return s
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is redis://host:port.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// LogPath is where redis-server logs.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "redis.log") }

// Start starts redis-server again after Stop or Kill, on the same port, and
// returns once it answers PING. Data does not survive: there is no
// persistence. Starting a running server is a no-op.
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
	args := append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", s.LogPath(),
		"--daemonize", "no",
		"--protected-mode", "no",
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the starting thread exits (golang/go#27505).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting %s: %w; %s", s.bin, err, installHint)
	}
	s.proc = p
	deadline := time.Now().Add(startTimeout)
	for {
		if err := ping(s.Addr()); err == nil {
			return nil
		}
		select {
		case <-p.done:
			s.proc = nil
			return fmt.Errorf("redis-server exited while starting; log %s:\n%s", s.LogPath(), tail(s.LogPath()))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-p.done
			s.proc = nil
			return fmt.Errorf("redis-server did not answer PING within %v; log:\n%s", startTimeout, tail(s.LogPath()))
		}
	}
}

// Stop shuts the server down (SIGTERM) and waits for it to exit.
func (s *Server) Stop() error { return s.signal(syscall.SIGTERM) }

// Kill SIGKILLs the server, as in a crash, and waits for it to exit.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(startTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("redis-server did not exit within %v of %v", startTimeout, sig)
	}
}

// Do sends one command over a new connection and returns the reply as text
// (RESP2 simple strings, errors, integers and bulk strings; arrays are
// joined with newlines). It is for test assertions and fault injection
// (SCRIPT FLUSH, FLUSHALL, DEBUG SLEEP), not for speed.
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		parts := make([]string, 0, max(n, 0))
		for i := 0; i < n; i++ {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Dump returns every key of the server's current database with its type
// and contents, one key a block ("key (type)" then the values, a line
// each), for tests that look for what must not be stored anywhere. Keys
// are listed with SCAN, so the server keeps serving meanwhile; a key that
// expires between SCAN and its read shows no values. Values are read by
// type (GET, HGETALL, LRANGE, SMEMBERS, ZRANGE, XRANGE) rather than DUMP,
// whose encoding may compress a long string.
func (s *Server) Dump() (string, error) {
	var keys []string
	cursor := "0"
	for {
		reply, err := s.Do("SCAN", cursor, "COUNT", "1000")
		if err != nil {
			return "", fmt.Errorf("redis SCAN: %w", err)
		}
		// The reply is the next cursor, then the keys (arrays flattened).
		lines := strings.Split(reply, "\n")
		cursor = lines[0]
		for _, k := range lines[1:] {
			if k != "" {
				keys = append(keys, k)
			}
		}
		if cursor == "0" {
			break
		}
	}
	var b strings.Builder
	for _, k := range keys {
		typ, err := s.Do("TYPE", k)
		if err != nil {
			return "", fmt.Errorf("redis TYPE %q: %w", k, err)
		}
		var cmd []string
		switch typ {
		case "string":
			cmd = []string{"GET", k}
		case "hash":
			cmd = []string{"HGETALL", k}
		case "list":
			cmd = []string{"LRANGE", k, "0", "-1"}
		case "set":
			cmd = []string{"SMEMBERS", k}
		case "zset":
			cmd = []string{"ZRANGE", k, "0", "-1", "WITHSCORES"}
		case "stream":
			cmd = []string{"XRANGE", k, "-", "+"}
		case "none":
			continue // expired since SCAN
		default:
			cmd = []string{"DUMP", k}
		}
		v, err := s.Do(cmd...)
		if err != nil {
			return "", fmt.Errorf("redis %s %q: %w", cmd[0], k, err)
		}
		fmt.Fprintf(&b, "%s (%s)\n%s\n", k, typ, v)
	}
	return b.String(), nil
}
