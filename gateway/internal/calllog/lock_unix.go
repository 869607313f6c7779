//go:build unix

package calllog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrSpoolInUse is returned by New when another Writer, in this process or
// another, holds the spool directory.
var ErrSpoolInUse = errors.New("spool directory in use by another writer")

// lockDir takes an exclusive flock on dir's lock file, so two Writers never
// append to one spool. The lock ends when the returned file is closed, or
// when the process dies.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the spool lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, ErrSpoolInUse)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}
