package sqlstore

import (
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
