//go:build !unix

package calllog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrSpoolInUse is returned by New when another Writer holds the spool
// directory. This platform has no flock: the check is not made, and two
// Writers on one directory would corrupt the spool.
var ErrSpoolInUse = errors.New("spool directory in use by another writer")

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the spool lock: %w", err)
	}
	return f, nil
}
