package portal_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/dnstest"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
	"github.com/acds-project/acds/portal"
)

// countingListener counts accepted connections and the bytes read.
type countingListener struct {
	net.Listener
	conns, bytes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns.Add(1)
		c = &countingConn{Conn: c, l: l}
	}
	return c, err
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.bytes.Add(int64(n))
	return n, err
}

// TestInProcessNotarySSRF is the in-process configuration of issue 15's
// SSRF case, composed as package service composes it: the notary's
// AllowAddr and the prover's are the strict Guard, and the notary resolves
// through a stub where trap.portal.test is 127.0.0.1. With a notary
// that applies the guard, nothing reaches the trap; with one that does not
// (an external notary run without it), the prover's check of the address
// the notary reports keeps every byte, and so the credentials, from it.
func TestInProcessNotarySSRF(t *testing.T) {
	ca := notarytest.NewCA(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trap := &countingListener{Listener: l}
	var requests atomic.Int64
	port := notarytest.ServeTLS(t, trap, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "trap.portal.test")}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1); io.WriteString(w, "{}") }))
	dns := dnstest.Start(t, map[string]dnstest.Mode{"trap.portal.test.": dnstest.Loopback})
	const password = "in-process-SECRET-4471"

	for _, c := range []struct {
		name     string
		allow    func(netip.AddrPort) error
		maxConns int64
	}{
		{"notary guard", portal.Guard{}.AllowAddrPort, 0},
		{"unguarded notary", portal.Guard{AllowPrivate: true}.AllowAddrPort, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			trap.conns.Store(0)
			n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool(), Resolver: dns.Resolver(), AllowAddr: c.allow})
			f := &portal.Fetcher{
				Connector: portal.Connector{Guard: portal.Guard{}},
				NewTransport: portal.Notarized{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key},
					TLSConfig: &tls.Config{RootCAs: ca.Pool()}, Guard: portal.Guard{}}.Factory(),
			}
			_, err := f.Fetch(context.Background(), portal.Request{SystemType: acds.SystemFHIRBasic,
				PortalURL: "https://trap.portal.test:" + port + "/fhir", RecordID: "pat-1",
				Credentials: portal.Credentials{Username: "u", Password: password}})
			if !errors.Is(err, portal.ErrForbidden) || portal.ProblemCode(err) != acds.ProblemForbiddenPortal {
				t.Fatalf("fetch from a name that resolves to loopback: %v, want forbidden", err)
			}
			if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), password) {
				t.Fatalf("the error names the address or the password: %v", err)
			}
			if got := trap.conns.Load(); got > c.maxConns {
				t.Fatalf("%d connections reached the trap; want at most %d", got, c.maxConns)
			}
		})
	}
	if b, r := trap.bytes.Load(), requests.Load(); b != 0 || r != 0 {
		t.Fatalf("the trap received %d bytes and %d requests; want none", b, r)
	}
}
