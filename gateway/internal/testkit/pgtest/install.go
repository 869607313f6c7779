package pgtest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sync/errgroup"
)

// tempPrefix starts the name of every directory pgtest creates under
// os.TempDir(), followed by the test binary's pid; see sweepStale.
const tempPrefix = "tollgate-pgtest-"

// installHint is how to get what is missing.
const installHint = "install Postgres: apt-get install -y postgresql (or set PGTEST_BIN_DIR to a directory holding initdb and postgres)"

// install is the Postgres installation the process uses, found once.
type install struct {
	postgres, initdb string
	// cred runs postgres and initdb as the OS user "postgres" when the test
	// runs as root, which initdb refuses; nil runs them as ourselves.
	cred *syscall.Credential

	clusterOnce sync.Once
	cluster     string // an initdb'ed data directory, copied for each server
	clusterErr  error
}

var (
	installOnce sync.Once
	installed   *install
	installErr  error
)

// findInstall locates initdb and postgres: $PGTEST_BIN_DIR, then PATH, then
// the newest /usr/lib/postgresql/*/bin. It also removes what earlier test
// binaries left behind.
func findInstall() (*install, error) {
	installOnce.Do(func() {
		sweepStale()
		installed, installErr = locate(debianBinGlob)
	})
	return installed, installErr
}

// debianBinGlob matches the binary directories of Debian's and Ubuntu's
// postgresql-NN packages, which are not in PATH.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

func locate(binGlob string) (*install, error) {
	var dirs []string
	if d := os.Getenv("PGTEST_BIN_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		// initdb runs the postgres beside its real path, so resolve links.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	versions, _ := filepath.Glob(binGlob)
	sort.Slice(versions, func(i, j int) bool { return majorOf(versions[i]) > majorOf(versions[j]) })
	dirs = append(dirs, versions...)
	var in *install
	for _, d := range dirs {
		pg, initdb := filepath.Join(d, "postgres"), filepath.Join(d, "initdb")
		if isExecutable(pg) && isExecutable(initdb) {
			in = &install{postgres: pg, initdb: initdb}
			break
		}
	}
	if in == nil {
		return nil, fmt.Errorf("Postgres server binaries (initdb, postgres) not found in $PGTEST_BIN_DIR, PATH or /usr/lib/postgresql/*/bin; %s", installHint)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and initdb refuses root, but there is no OS user %q to run Postgres as (%v); %s", "postgres", err, installHint)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		in.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return in, nil
}

// majorOf returns the version in /usr/lib/postgresql/<version>/bin.
func majorOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// copyCluster copies a freshly initdb'ed data directory to dst: initdb takes
// over a second, a copy a fraction of that.
func (in *install) copyCluster(dst string) error {
	in.clusterOnce.Do(func() { in.cluster, in.clusterErr = in.initCluster() })
	if in.clusterErr != nil {
		return in.clusterErr
	}
	if err := copyTree(in.cluster, dst, in.cred); err != nil {
		return fmt.Errorf("copying the initdb'ed cluster: %w", err)
	}
	return nil
}

// initCluster returns an initdb'ed data directory to copy. It is kept under
// os.TempDir() for later test binaries, keyed by the binaries and the user,
// which saves each binary the second initdb takes.
func (in *install) initCluster() (string, error) {
	cache, err := in.cacheDir()
	if err != nil {
		return "", err
	}
	if in.trusted(cache) {
		return filepath.Join(cache, "data"), nil
	}
	dir, err := os.MkdirTemp("", tempPrefix+strconv.Itoa(os.Getpid())+"-initdb-")
	if err != nil {
		return "", fmt.Errorf("creating a temporary directory: %w", err)
	}
	if err := chownToRunner(dir, in.cred); err != nil {
		return "", err
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(in.initdb, "-D", data, "-U", "postgres", "--auth=trust",
		"--no-sync", "--no-instructions", "--locale=C", "--encoding=UTF8")
	cmd.Dir = dir
	cmd.Env = []string{"LC_ALL=C", "LANG=C", "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: in.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", in.initdb, err, out)
	}
	// Publish atomically; if another binary was first, use ours anyway
	// (sweepStale removes it later).
	if err := os.Rename(dir, cache); err == nil {
		return filepath.Join(cache, "data"), nil
	}
	return data, nil
}

// cacheDir names the cached cluster of this installation and user.
func (in *install) cacheDir() (string, error) {
	h := sha256.New()
	for _, bin := range []string{in.initdb, in.postgres} {
		fi, err := os.Stat(bin)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\n", bin, fi.Size(), fi.ModTime().UnixNano())
	}
	fmt.Fprintf(h, "uid %d\n", in.runnerUID())
	return filepath.Join(os.TempDir(), fmt.Sprintf("%scache-%x", tempPrefix, h.Sum(nil)[:8])), nil
}

// trusted reports whether dir is a complete cached cluster that only the
// user postgres runs as (or we) could have written: os.TempDir() is shared,
// and a planted postgresql.conf could run commands.
func (in *install) trusted(dir string) bool {
	for _, p := range []string{dir, filepath.Join(dir, "data"), filepath.Join(dir, "data", "postgresql.conf"), filepath.Join(dir, "data", "global", "pg_control")} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&(fs.ModeSymlink|0o022) != 0 {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) != in.runnerUID() {
			return false
		}
	}
	return true
}

// runnerUID is the uid postgres runs as.
func (in *install) runnerUID() int {
	if in.cred != nil {
		return int(in.cred.Uid)
	}
	return os.Geteuid()
}

// copyTree copies the directory src to dst (which must not exist), keeping
// modes, and hands every copy to cred's user if cred is set. Directories are
// made in walk order; files are copied by a few goroutines, which about
// halves the time of the thousand small files of a cluster.
func copyTree(src, dst string, cred *syscall.Credential) error {
	var g errgroup.Group
	g.SetLimit(4)
	walkErr := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
			return chownToRunner(target, cred)
		case info.Mode().IsRegular():
			g.Go(func() error {
				if err := copyFile(path, target, info.Mode().Perm()); err != nil {
					return err
				}
				return chownToRunner(target, cred)
			})
			return nil
		default:
			return fmt.Errorf("%s: unexpected file type %v", path, info.Mode().Type())
		}
	})
	return errors.Join(walkErr, g.Wait())
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// chownToRunner gives path to the user postgres runs as, if not ourselves.
func chownToRunner(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Lchown(path, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("handing %s to the postgres user: %w", path, err)
	}
	return nil
}

// sweepStale removes the directories of test binaries that have exited
// without removing them (the Shared server's always, any on a crash). Their
// postgres got SIGQUIT when the binary exited (Pdeathsig).
func sweepStale() {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}
