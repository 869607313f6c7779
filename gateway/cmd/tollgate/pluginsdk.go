package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate/tollgate/sdk"
)

// sdkSource is the Go SDK module's source built into tollgate (go.mod,
// go.sum and the packages' Go files), which a new Go plugin's go.mod
// replaces the SDK with, so that it builds without fetching the SDK.
var sdkSource fs.FS = sdk.Source

// unpackSDK writes sdkSource into the user cache dir, in a folder named by
// its hash (written once, reused by every plugin made with this build of
// tollgate), and returns that folder.
func unpackSDK() (string, error) {
	if sdkSource == nil {
		return "", errors.New("this tollgate has no SDK source built in: give a checkout's sdk folder with -sdk DIR")
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache dir for the SDK (set $XDG_CACHE_HOME, or give -sdk DIR): %w", err)
	}
	return unpackModule(sdkSource, filepath.Join(base, "tollgate", "sdk"))
}

// unpackModule writes src, less its tests, into parent/<hash of src>,
// unless it is there already, and returns that folder. It writes into a temporary folder
// first and renames it, so a folder that exists is complete.
func unpackModule(src fs.FS, parent string) (string, error) {
	var files []string
	h := sha256.New()
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		files = append(files, p) // WalkDir walks in lexical order
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading the SDK built into tollgate: %w", err)
	}
	dir := filepath.Join(parent, hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("unpacking the SDK: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("unpacking the SDK: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, p := range files {
		b, _ := fs.ReadFile(src, p)
		out := filepath.Join(tmp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", fmt.Errorf("unpacking the SDK: %w", err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			return "", fmt.Errorf("unpacking the SDK: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another tollgate unpacked the same SDK meanwhile.
		if _, statErr := os.Stat(filepath.Join(dir, "go.mod")); statErr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("unpacking the SDK: %w", err)
	}
	return dir, nil
}
