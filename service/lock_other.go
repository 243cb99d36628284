//go:build !unix

package service

import "os"

// tryLock does not lock on systems without flock: there, one service per
// data directory is the operator's to ensure.
func tryLock(f *os.File) (bool, error) { return true, nil }
