//go:build !linux

package sqlstore

import (
	"errors"
	"os"
)

// allocate is fallocate(2) on Linux; elsewhere the caller writes zeros.
func allocate(*os.File, int64) error { return errors.ErrUnsupported }
