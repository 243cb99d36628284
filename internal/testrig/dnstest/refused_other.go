//go:build !unix

package dnstest

import (
	"net"
	"testing"
)

// RefusedPort returns a loopback TCP port that nothing listens on. Where
// a socket cannot be bound without listening, the port is found by
// listening and closing again, so another listener may take it later.
func RefusedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}
