package prover

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// trap is a loopback TCP listener that counts connections and bytes
// received: the place a request must never reach.
type trap struct {
	addr         string
	conns, bytes atomic.Int64
}

func startTrap(t *testing.T) *trap {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	tr := &trap{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tr.conns.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				n, _ := io.Copy(io.Discard, c)
				tr.bytes.Add(n)
			}()
		}
	}()
	return tr
}

var errNoLoopback = errors.New("loopback addresses are refused")

func refuseLoopback(_ string, a netip.AddrPort) error {
	if a.Addr().IsLoopback() {
		return errNoLoopback
	}
	return nil
}

// TestAllowAddrRefusesBeforeSending: a notary without an address guard
// dials what a name resolves to (here loopback); a prover with AllowAddr
// reads the address the notary reports and closes the tunnel before
// sending anything, not even its ClientHello (issue 15). The error names
// the host, not the address.
func TestAllowAddrRefusesBeforeSending(t *testing.T) {
	tr := startTrap(t)
	_, port, _ := net.SplitHostPort(tr.addr)
	n := notarytest.StartNotary(t, notary.Config{AllowAddr: func(netip.AddrPort) error { return nil }})
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, AllowAddr: refuseLoopback}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := d.DialTLSContext(ctx, "tcp", "internal.test:"+port)
	var ae *AddressError
	if !errors.Is(err, ErrRefusedAddress) || !errors.Is(err, errNoLoopback) || !errors.As(err, &ae) {
		t.Fatalf("dial through an unguarded notary to loopback: %v", err)
	}
	if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), errNoLoopback.Error()) {
		t.Fatalf("the refusal names the address or the rule: %v", err)
	}
	// The notary closes the tunnel's upstream once the client goes.
	deadline := time.Now().Add(5 * time.Second)
	for tr.conns.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if got := tr.bytes.Load(); got != 0 {
		t.Fatalf("the trap received %d bytes; want none", got)
	}
	if len(d.Sessions()) != 0 {
		t.Fatalf("a refused dial left a session")
	}
}

// TestAllowAddrNeedsTheReportedAddress: a notary that does not say which
// address it dialled is refused when AllowAddr is set.
func TestAllowAddrNeedsTheReportedAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan int64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 Connection Established\r\n%s: %s\r\n\r\n", notary.SessionHeader, strings.Repeat("ab", 16))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := io.Copy(io.Discard, br)
		got <- n
	}()
	d := &Dialer{Notary: l.Addr().String(), AllowAddr: refuseLoopback}
	_, err = d.DialTLSContext(context.Background(), "tcp", "portal.test:443")
	if !errors.Is(err, ErrRefusedAddress) {
		t.Fatalf("dial through a notary that reports no address: %v", err)
	}
	if n := <-got; n != 0 {
		t.Fatalf("%d bytes sent into a tunnel whose address is unknown", n)
	}
}

// TestAllowAddrStatementMustNameTheReportedAddress: with AllowAddr set, a
// statement naming another address than the notary reported when it
// dialled is refused.
func TestAllowAddrStatementMustNameTheReportedAddress(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "addr.test"
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, servePayload())
	n := startTamperingNotary(t, ca, func(r *notary.FinalizeResponse, k ed25519.PrivateKey) {
		r.Statement = resign(t, r.Statement, k, func(s *mpctls.Statement) { s.Address = "192.0.2.1:443" })
	})
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: ca.Pool()},
		AllowAddr: func(string, netip.AddrPort) error { return nil }}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
	if err := get(&http.Client{Transport: tr}, "https://"+host+":"+port+"/payload?n=100", 100); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.FinalizeAll(ctx); !errors.Is(err, ErrMismatch) {
		t.Fatalf("statement with another address: %v", err)
	}
}
