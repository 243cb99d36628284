package sqlstore

import (
	"errors"
	"os"
	"syscall"
)

// diskSpace is the size of the file system holding dir and the room left
// on it to an unprivileged writer.
func diskSpace(dir string) (total, free int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), nil
}

// allocate gives f size bytes of disk without writing them
// (fallocate(2)); where the file system cannot, the caller writes zeros.
func allocate(f *os.File, size int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, 0, size)
}

// heldOnDisk is the room a file holds on disk: its allocated blocks,
// which a sparse file (made by truncate, or copied sparse) lacks whatever
// its size says.
func heldOnDisk(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}

// allocateUnsupported reports whether err says the file system cannot
// allocate without writing, the only case where zeros are written
// instead (not on a full disk: ENOSPC is final).
func allocateUnsupported(err error) bool {
	return errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)
}
