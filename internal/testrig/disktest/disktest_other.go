//go:build !linux

package disktest

import "testing"

// Small skips the test: a small file system to fill is mounted on Linux
// only.
func Small(t testing.TB, _ int) string {
	t.Helper()
	t.Skip("a small file system to fill is mounted on Linux only")
	return ""
}
