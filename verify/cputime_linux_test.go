package verify_test

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used (user +
// system). Benchmarks lock their goroutine to a thread and compare these,
// so that other processes competing for the CPU do not distort the ratio.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
