// Package disktest gives tests a small file system of their own to fill,
// for the full-disk paths of the stores and the server. Mounting one needs
// Linux and root (CI runs as root); elsewhere the tests that ask for it
// are skipped.
package disktest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Fill writes a file of zeros named name in dir until the file system
// holding dir has no room left (ENOSPC), as another program filling the
// disk would, and returns its path. The test ends it by removing the file.
func Fill(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			buf = buf[:len(buf)/2] // the last blocks, smaller and smaller
		}
	}
	return path
}
