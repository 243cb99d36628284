//go:build !linux

package sqlstore

import (
	"errors"
	"os"
)

// diskSpace is not measured here, so there is no reserve and no
// admission watermark (room.go).
func diskSpace(string) (total, free int64, err error) { return 0, 0, errors.ErrUnsupported }

// allocate is fallocate(2) on Linux; elsewhere the caller writes zeros.
func allocate(*os.File, int64) error { return errors.ErrUnsupported }

// heldOnDisk is the file's size here, where blocks are not read (and
// there is no reserve).
func heldOnDisk(path string) int64 { return fileSize(path) }

// allocateUnsupported: allocate always is, here.
func allocateUnsupported(error) bool { return true }
