package deploycheck

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// Instruction is one Dockerfile instruction, continuation lines joined.
type Instruction struct {
	Line int
	Cmd  string // upper case: FROM, RUN, COPY, ...
	Args string
}

// Stage is one FROM ... [AS name] and its instructions.
type Stage struct {
	Name, From   string
	Instructions []Instruction
}

// ParseDockerfile splits a Dockerfile into stages. It knows the syntax
// this repository's Dockerfile uses (comments, `\` continuations, parser
// directives), not heredocs.
func ParseDockerfile(text string) ([]Stage, error) {
	var (
		stages []Stage
		cur    *Stage
		buf    strings.Builder
		start  int
	)
	flush := func() error {
		line := strings.TrimSpace(buf.String())
		buf.Reset()
		if line == "" {
			return nil
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := Instruction{Line: start, Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := Stage{}
			for i := 0; i < len(f); i++ {
				switch {
				case strings.HasPrefix(f[i], "--"):
				case strings.EqualFold(f[i], "AS") && i+1 < len(f):
					st.Name = f[i+1]
					i++
				case st.From == "":
					st.From = f[i]
				}
			}
			stages = append(stages, st)
			cur = &stages[len(stages)-1]
			return nil
		}
		if cur == nil {
			if in.Cmd != "ARG" {
				return fmt.Errorf("line %d: %s before the first FROM", in.Line, in.Cmd)
			}
			return nil
		}
		cur.Instructions = append(cur.Instructions, in)
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") {
			continue // comments (and parser directives)
		}
		if buf.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `\`); ok {
			buf.WriteString(body)
			buf.WriteByte(' ')
			continue
		}
		buf.WriteString(line)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if buf.Len() > 0 {
		return nil, fmt.Errorf("line %d: a continuation runs to the end of the file", start)
	}
	return stages, nil
}

// Stage returns the stage called name.
func StageNamed(stages []Stage, name string) *Stage {
	for i := range stages {
		if stages[i].Name == name {
			return &stages[i]
		}
	}
	return nil
}

// Copy is a COPY instruction's sources and destination.
type Copy struct {
	From, Chown string
	Srcs        []string
	Dst         string
}

// Copies returns a stage's COPY instructions.
func (s *Stage) Copies() []Copy {
	var out []Copy
	for _, in := range s.Instructions {
		if in.Cmd != "COPY" {
			continue
		}
		var c Copy
		var rest []string
		for _, f := range strings.Fields(in.Args) {
			switch {
			case strings.HasPrefix(f, "--from="):
				c.From = strings.TrimPrefix(f, "--from=")
			case strings.HasPrefix(f, "--chown="):
				c.Chown = strings.TrimPrefix(f, "--chown=")
			case strings.HasPrefix(f, "--"):
			default:
				rest = append(rest, f)
			}
		}
		if len(rest) >= 2 {
			c.Srcs, c.Dst = rest[:len(rest)-1], rest[len(rest)-1]
		}
		out = append(out, c)
	}
	return out
}

// Last returns the last value of instruction cmd in the stage ("" if none).
func (s *Stage) Last(cmd string) string {
	v := ""
	for _, in := range s.Instructions {
		if in.Cmd == cmd {
			v = in.Args
		}
	}
	return v
}

// CopyContext copies the files of the build context root into dst, leaving
// out what the ignore file excludes, as BuildKit sends the context. It
// returns the number of files copied.
func CopyContext(root, ignoreFile, dst string) (int, error) {
	f, err := os.Open(ignoreFile)
	if err != nil {
		return 0, err
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", ignoreFile, err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", ignoreFile, err)
	}
	n := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		excluded, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		if excluded {
			if d.IsDir() && !pm.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			n++
			return copyFile(p, target)
		}
		return nil
	})
	return n, err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// RunBuild runs the image's build script (deploy/docker/build.sh) in the
// build context ctxDir, writing to out.
func RunBuild(ctxDir, out string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(ctxDir, "deploy/docker/build.sh"), out)
	cmd.Dir = ctxDir
	// GOFLAGS may carry -buildvcs etc. from the caller; the context has no
	// .git (dockerignore), as in the image build.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return b.String(), fmt.Errorf("deploy/docker/build.sh: %v\n%s", err, b.String())
	}
	return b.String(), nil
}

// CheckStatic reports whether the ELF file at p is statically linked: no
// program interpreter and no shared libraries (what a distroless static
// image, which has no libc, can run).
func CheckStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s has a program interpreter (dynamically linked)", p)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %v", p, libs)
	}
	return nil
}

// CheckWasm reports whether p is a WebAssembly module that exports
// _initialize (what -buildmode=c-shared produces for wasip1, and what the
// gateway's plugin host calls).
func CheckWasm(p string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		return fmt.Errorf("%s is not a WebAssembly module", p)
	}
	if !bytes.Contains(b, []byte("_initialize")) {
		return fmt.Errorf("%s exports no _initialize: not built with -buildmode=c-shared", p)
	}
	return nil
}

// ResolveCopies maps the final stage's COPY --from=build sources to files
// under the build output and the context (stageDirs: the build stage's path
// prefixes → local directories) and reports every source that does not
// exist. It returns the image's files: destination → local source.
func ResolveCopies(st *Stage, buildStage string, stageDirs map[string]string) (map[string]string, error) {
	files := map[string]string{}
	var errs []error
	for _, c := range st.Copies() {
		if c.From != buildStage {
			errs = append(errs, fmt.Errorf("stage %s: COPY %v does not come from the %s stage", st.Name, c.Srcs, buildStage))
			continue
		}
		for _, src := range c.Srcs {
			local := ""
			for prefix, dir := range stageDirs {
				if rest, ok := strings.CutPrefix(src, prefix); ok {
					local = filepath.Join(dir, filepath.FromSlash(rest))
				}
			}
			if local == "" {
				errs = append(errs, fmt.Errorf("stage %s: COPY source %s is outside %v", st.Name, src, stageDirs))
				continue
			}
			if _, err := os.Stat(local); err != nil {
				errs = append(errs, fmt.Errorf("stage %s: COPY source %s: %v", st.Name, src, err))
				continue
			}
			dst := c.Dst
			if strings.HasSuffix(dst, "/") && !strings.HasSuffix(src, "/") {
				dst = path.Join(dst, path.Base(src))
			}
			files[dst] = local
		}
	}
	return files, errors.Join(errs...)
}
