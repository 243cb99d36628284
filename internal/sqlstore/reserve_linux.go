package sqlstore

import (
	"os"
	"syscall"
)

// allocate gives f size bytes of disk without writing them
// (fallocate(2)); file systems without it make it fail, and the caller
// writes zeros instead.
func allocate(f *os.File, size int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, 0, size)
}
