package sqlstore

import (
	"os"
	"syscall"
)

// datasync flushes f's data to disk (fdatasync(2)): the mark file keeps
// its size, so its metadata need not be flushed with it.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// syncDir flushes the directory dir, so that a file created or renamed
// in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
