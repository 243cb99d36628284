//go:build unix

package dnstest

import (
	"strconv"
	"syscall"
	"testing"
)

// RefusedPort returns a loopback TCP port that refuses every connection
// until the test ends. It is held by a socket bound to 127.0.0.1 that
// never listens: a connection to it is refused (RST), and no other
// listener, in this process or another test binary running beside it,
// can take the port meanwhile. (A port found by listening and closing
// again is free for the kernel to hand out; under go test ./... another
// package's server took one, and the "refused" connection was answered.)
func RefusedPort(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("dnstest: socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	// No SO_REUSEADDR: a listener that sets it still cannot share the port.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("dnstest: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("dnstest: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok || in4.Port == 0 {
		t.Fatalf("dnstest: bound to %v", sa)
	}
	return strconv.Itoa(in4.Port)
}
