//go:build !linux

package sqlstore

import (
	"os"
	"runtime"
)

// datasync flushes f to disk (fsync: fdatasync is Linux's).
func datasync(f *os.File) error { return f.Sync() }

// syncDir flushes the directory dir where the system can (not Windows,
// whose directories cannot be opened for syncing).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
