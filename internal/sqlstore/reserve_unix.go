//go:build unix

package sqlstore

import "syscall"

// freeBytes is the room left to an unprivileged writer on the file
// system holding path.
func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dirOf(path), &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
