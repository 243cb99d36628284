//go:build !linux

package disclosure_test

import "time"

// threadCPU is not available here; benchmarks fall back to wall time.
func threadCPU() (time.Duration, bool) { return 0, false }
