package dnstest

import (
	"errors"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestRefusedPortRefusesAndIsHeld: a connection to the port is refused,
// and while the test runs no listener can take the port.
func TestRefusedPortRefusesAndIsHeld(t *testing.T) {
	port := RefusedPort(t)
	addr := net.JoinHostPort("127.0.0.1", port)
	_, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("a listener took %s while it was held", addr)
	}
}
