package doccheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// helpTimeout bounds one run of a program asked for help.
const helpTimeout = 30 * time.Second

// BuildPrograms builds every program under root/gateway/cmd into dir with
// the go command ($GO, else go) and returns each one's Help, by name.
func BuildPrograms(root, dir string) (map[string]Help, error) {
	entries, err := os.ReadDir(filepath.Join(root, "gateway", "cmd"))
	if err != nil {
		return nil, fmt.Errorf("listing the programs: %w", err)
	}
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	build := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator), "./gateway/cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building gateway/cmd/...: %w\n%s", err, out)
	}
	programs := map[string]Help{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		bin := filepath.Join(dir, e.Name())
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("gateway/cmd/%s built no binary: %w", e.Name(), err)
		}
		programs[e.Name()] = binaryHelp(bin)
	}
	return programs, nil
}

// binaryHelp is the Help of the executable at bin.
func binaryHelp(bin string) Help {
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), helpTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdin = nil
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s %v: %w", bin, args, ctx.Err())
		}
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return "", fmt.Errorf("%s %v: %w", bin, args, err)
		}
		return string(out), nil
	}
}
