//go:build !linux

// Package disktest gives tests a small file system of their own to fill,
// for the full-disk paths of the stores and the server.
package disktest

import "testing"

// Small skips the test: mounting a small tmpfs is done on Linux only.
func Small(t testing.TB, _ int) string {
	t.Helper()
	t.Skip("a small file system to fill is mounted on Linux only")
	return ""
}
