package notary_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// tunnel opens a CONNECT tunnel to target through the notary at addr.
func tunnel(t *testing.T, addr, target string) (net.Conn, string, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return c, resp.Header.Get(notary.SessionHeader), resp
}

// finalize posts a finalize request and returns the status and problem.
func finalize(t *testing.T, addr, id string, req notary.FinalizeRequest) (int, notary.Problem) {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post("http://"+addr+notary.FinalizePath(id), "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p notary.Problem
	json.NewDecoder(resp.Body).Decode(&p)
	return resp.StatusCode, p
}

// countingServer is a Go TLS server that counts the ClientHellos it got.
func countingServer(t *testing.T, cfg *tls.Config) (port string, hellos *atomic.Int32) {
	hellos = new(atomic.Int32)
	cfg = cfg.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		hellos.Add(1)
		return nil, nil
	}
	return notarytest.StartTLSServer(t, cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})), hellos
}

// expectRefused waits for the notary to cut the tunnel and checks that
// finalizing the session reports a refusal.
func expectRefused(t *testing.T, n *notarytest.Notary, c net.Conn, id string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("tunnel not cut: %v", err)
	}
	status, p := finalize(t, n.Addr, id, notary.FinalizeRequest{ClientRecords: 1, ServerRecords: 1})
	if status != http.StatusUnprocessableEntity || p.Type != notary.ProblemSession || !strings.Contains(p.Detail, "refused") {
		t.Fatalf("finalize: %d %+v, want 422 refusal", status, p)
	}
}

func TestRefusesNonTLS(t *testing.T) {
	var got atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { n, _ := io.Copy(io.Discard, c); got.Add(n); c.Close() }()
		}
	}()
	n := notarytest.StartNotary(t, notary.Config{})
	c, id, resp := tunnel(t, n.Addr, "plain.test:"+portOf(l.Addr()))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status %d", resp.StatusCode)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: plain.test\r\n\r\n")
	expectRefused(t, n, c, id)
	if got.Load() != 0 {
		t.Fatalf("the server received %d bytes of refused traffic", got.Load())
	}
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

func TestRefusesOldTLSAndCBC(t *testing.T) {
	ca := notarytest.NewCA(t)
	cert := ca.Issue(t, notarytest.RSA, "old.test")
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	cases := []struct {
		name      string
		client    *tls.Config
		serverMax uint16
		reachesSv bool // the ClientHello is acceptable; the ServerHello is not
	}{
		{"client-tls11", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, 0, false},
		{"server-tls11", &tls.Config{MinVersion: tls.VersionTLS10}, tls.VersionTLS11, true},
		{"tls12-cbc", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}}, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			port, hellos := countingServer(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS10, MaxVersion: c.serverMax,
				CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}})
			conn, id, _ := tunnel(t, n.Addr, "old.test:"+port)
			cfg := c.client.Clone()
			cfg.RootCAs, cfg.ServerName = ca.Pool(), "old.test"
			tc := tls.Client(conn, cfg)
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err == nil {
				t.Fatal("handshake succeeded through a refusing notary")
			}
			expectRefused(t, n, conn, id)
			if got := hellos.Load(); (got == 1) != c.reachesSv {
				t.Fatalf("server saw %d ClientHellos", got)
			}
		})
	}
}

func TestRefusesResumption(t *testing.T) {
	ca := notarytest.NewCA(t)
	cert := ca.Issue(t, notarytest.ECDSA, "resume.test")
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			port, hellos := countingServer(t, &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: v})
			cache := tls.NewLRUClientSessionCache(4)
			cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "resume.test", ClientSessionCache: cache, MaxVersion: v}
			// First session: full handshake, gets a ticket.
			conn, _, _ := tunnel(t, n.Addr, "resume.test:"+port)
			tc := tls.Client(conn, cfg)
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			// Tickets arrive after the handshake in 1.3: read until the
			// server has spoken, via one HTTP request.
			io.WriteString(tc, "GET / HTTP/1.1\r\nHost: resume.test\r\nConnection: close\r\n\r\n")
			io.Copy(io.Discard, tc)
			tc.Close()
			// Second session: the client offers to resume.
			conn2, id2, _ := tunnel(t, n.Addr, "resume.test:"+port)
			tc2 := tls.Client(conn2, cfg)
			tc2.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc2.Handshake(); err == nil {
				t.Fatal("resumed handshake succeeded through the notary")
			}
			expectRefused(t, n, conn2, id2)
			if got := hellos.Load(); got != 1 {
				t.Fatalf("server saw %d ClientHellos, want only the first", got)
			}
		})
	}
}

func TestRefusesServerNameMismatch(t *testing.T) {
	ca := notarytest.NewCA(t)
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	port, hellos := countingServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "a.test", "b.test")}})
	conn, id, _ := tunnel(t, n.Addr, "a.test:"+port)
	tc := tls.Client(conn, &tls.Config{RootCAs: ca.Pool(), ServerName: "b.test"})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err == nil {
		t.Fatal("handshake for another name succeeded")
	}
	expectRefused(t, n, conn, id)
	if hellos.Load() != 0 {
		t.Fatal("server saw the ClientHello")
	}
}

func TestCapacity(t *testing.T) {
	ca := notarytest.NewCA(t)
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool(), MaxSessions: 1})
	port, _ := countingServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "cap.test")}})
	_, _, resp := tunnel(t, n.Addr, "cap.test:"+port)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first CONNECT: %d", resp.StatusCode)
	}
	_, _, resp2 := tunnel(t, n.Addr, "cap.test:"+port)
	if resp2.StatusCode != http.StatusServiceUnavailable || resp2.Header.Get("Retry-After") == "" {
		t.Fatalf("second CONNECT: %d, want 503 with Retry-After", resp2.StatusCode)
	}
	if n.Sessions() != 1 {
		t.Fatalf("%d sessions held", n.Sessions())
	}
}

func TestSessionTimeout(t *testing.T) {
	ca := notarytest.NewCA(t)
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool(), SessionTimeout: 300 * time.Millisecond})
	port, _ := countingServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "slow.test")}})
	conn, id, resp := tunnel(t, n.Addr, "slow.test:"+port)
	if got := resp.Header.Get(notary.AddressHeader); got != "127.0.0.1:"+port {
		t.Fatalf("CONNECT answer reports address %q, want the one dialled, 127.0.0.1:%s", got, port)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := io.Copy(io.Discard, conn); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("idle tunnel not cut: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("tunnel cut after %v", el)
	}
	status, p := finalize(t, n.Addr, id, notary.FinalizeRequest{ClientRecords: 1, ServerRecords: 1})
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("finalize of a timed-out session: %d %+v", status, p)
	}
}

func TestBadTargets(t *testing.T) {
	n := notarytest.StartNotary(t, notary.Config{
		AllowAddr: func(a netip.AddrPort) error {
			if a.Port() == 9 {
				return errors.New("port 9 is not allowed")
			}
			return nil
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if strings.HasSuffix(addr, ":1") {
				return nil, errors.New("refused")
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	})
	for _, c := range []struct {
		target string
		status int
	}{
		{"no-port", http.StatusForbidden},
		{"x.test:0", http.StatusForbidden},
		{"x.test:9", http.StatusForbidden},
		{"x.test:1", http.StatusBadGateway},
	} {
		_, _, resp := tunnel(t, n.Addr, c.target)
		if resp.StatusCode != c.status {
			t.Errorf("CONNECT %s: %d, want %d", c.target, resp.StatusCode, c.status)
		}
		// A refusal names the target as given, never the address a name
		// resolved to nor the rule's own words (issue 15).
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), "port 9") {
			t.Errorf("CONNECT %s: the refusal names the resolved address or the rule: %s", c.target, body)
		}
	}
	if n.Sessions() != 0 {
		t.Fatalf("%d sessions held after failed CONNECTs", n.Sessions())
	}
	if status, _ := finalize(t, n.Addr, "00112233445566778899aabbccddeeff", notary.FinalizeRequest{}); status != http.StatusNotFound {
		t.Fatalf("unknown session: %d", status)
	}
	resp, err := http.Post("http://"+n.Addr+notary.FinalizePath("x"), "application/json", strings.NewReader("{nope"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed finalize: %d", resp.StatusCode)
	}
}

// TestRefusesUnknownRecordType sends a genuine ClientHello and then a
// record of type 24 (heartbeat): the notary relays the hello, cuts the
// tunnel at the unknown record and will not notarize the session.
func TestRefusesUnknownRecordType(t *testing.T) {
	ca := notarytest.NewCA(t)
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	port, hellos := countingServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "rt.test")}})
	conn, id, _ := tunnel(t, n.Addr, "rt.test:"+port)
	// Let crypto/tls write its ClientHello into the tunnel, then inject.
	tc := tls.Client(conn, &tls.Config{RootCAs: ca.Pool(), ServerName: "rt.test"})
	go func() {
		tc.SetDeadline(time.Now().Add(2 * time.Second))
		tc.Handshake()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for hellos.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if hellos.Load() != 1 {
		t.Fatal("the ClientHello did not reach the server")
	}
	conn.Write([]byte{24, 3, 3, 0, 3, 1, 0, 0})
	expectRefused(t, n, conn, id)
}

// TestServerNameCheckedAcrossFragments splits a ClientHello for another
// name over two records: the name check must still happen.
func TestServerNameCheckedAcrossFragments(t *testing.T) {
	ca := notarytest.NewCA(t)
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	port, hellos := countingServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "a.test")}})
	conn, id, _ := tunnel(t, n.Addr, "a.test:"+port)
	// Capture a ClientHello for b.test, then send it in two records.
	cpipe, spipe := net.Pipe()
	go tls.Client(cpipe, &tls.Config{ServerName: "b.test", InsecureSkipVerify: true}).Handshake()
	spipe.SetDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	io.ReadFull(spipe, hdr)
	msg := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	io.ReadFull(spipe, msg)
	cpipe.Close()
	first := append([]byte{22, 3, 1, 0, 20}, msg[:20]...)
	rest := msg[20:]
	second := append([]byte{22, 3, 1, byte(len(rest) >> 8), byte(len(rest))}, rest...)
	conn.Write(append(first, second...))
	expectRefused(t, n, conn, id)
	if hellos.Load() != 0 {
		t.Fatal("the ClientHello for another name reached the server")
	}
}

func TestSessionDoneReports(t *testing.T) {
	infos := make(chan notary.SessionInfo, 4)
	n := notarytest.StartNotary(t, notary.Config{
		FinalizeTimeout: 200 * time.Millisecond,
		SessionDone:     func(i notary.SessionInfo) { infos <- i },
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	// A refused session, finalized: reported unsigned with the refusal.
	c, id, _ := tunnel(t, n.Addr, "done.test:"+portOf(l.Addr()))
	io.WriteString(c, "not tls at all\r\n")
	expectRefused(t, n, c, id)
	select {
	case i := <-infos:
		if i.ID != id || i.Signed || !errors.Is(i.Err, notary.ErrRefused) || i.Host != "done.test" || !i.Address.Addr().IsLoopback() {
			t.Fatalf("report %+v", i)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no report for a finalized session")
	}
	// A session nobody finalizes: reported as expired.
	c2, id2, _ := tunnel(t, n.Addr, "done.test:"+portOf(l.Addr()))
	c2.Close()
	select {
	case i := <-infos:
		if i.ID != id2 || i.Signed || !errors.Is(i.Err, notary.ErrExpired) {
			t.Fatalf("report %+v", i)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no report for an expired session")
	}
	if n.Sessions() != 0 {
		t.Fatalf("%d sessions held after expiry", n.Sessions())
	}
}

type listResolver []netip.Addr

func (r listResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return r, nil
}

// TestTriesResolvedAddressesInOrder: disallowed addresses are skipped,
// unreachable ones passed over, and the session names the one that answered.
func TestTriesResolvedAddressesInOrder(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	infos := make(chan notary.SessionInfo, 1)
	n := notarytest.StartNotary(t, notary.Config{
		Resolver: listResolver{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if strings.HasPrefix(addr, "127.0.0.2:") {
				return nil, errors.New("unreachable")
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		SessionDone: func(i notary.SessionInfo) { infos <- i },
	})
	c, id, resp := tunnel(t, n.Addr, "multi.test:"+portOf(l.Addr()))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
	expectRefused(t, n, c, id)
	if i := <-infos; i.Address.String() != "127.0.0.1:"+portOf(l.Addr()) {
		t.Fatalf("session dialled %v, want 127.0.0.1", i.Address)
	}
	// Nothing allowed at all: refused.
	n2 := notarytest.StartNotary(t, notary.Config{Resolver: listResolver{netip.MustParseAddr("192.0.2.1")}})
	if _, _, resp := tunnel(t, n2.Addr, "multi.test:443"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("only disallowed addresses: %d, want 403", resp.StatusCode)
	}
}

// failingResolver fails every lookup as a real resolver would, naming
// itself.
type failingResolver struct{ err error }

func (r failingResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, r.err
}

// TestUnresolvedTarget: a CONNECT host that does not resolve is 502
// ProblemTargetUnresolved (nothing was refused, so not 403), and the
// detail names the host and the kind of failure, not the resolver.
func TestUnresolvedTarget(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind string
	}{
		{&net.DNSError{Err: "no such host", Name: "gone.test", Server: "10.9.8.7:53", IsNotFound: true}, "no such host"},
		{&net.DNSError{Err: "server misbehaving", Name: "gone.test", Server: "10.9.8.7:53", IsTemporary: true}, "the lookup failed"},
		{&net.DNSError{Err: "read udp 10.1.1.1:5353->10.9.8.7:53: i/o timeout", Name: "gone.test", Server: "10.9.8.7:53", IsTimeout: true}, "timed out"},
	} {
		n := notarytest.StartNotary(t, notary.Config{Resolver: failingResolver{tc.err}})
		_, _, resp := tunnel(t, n.Addr, "gone.test:443")
		var p notary.Problem
		json.NewDecoder(resp.Body).Decode(&p)
		if resp.StatusCode != http.StatusBadGateway || p.Type != notary.ProblemTargetUnresolved {
			t.Errorf("%v: %d %s, want 502 %s", tc.err, resp.StatusCode, p.Type, notary.ProblemTargetUnresolved)
		}
		if !strings.Contains(p.Detail, `"gone.test"`) || !strings.Contains(p.Detail, tc.kind) || strings.Contains(p.Detail, "10.") || strings.Contains(p.Detail, "lookup gone") {
			t.Errorf("%v: detail %q", tc.err, p.Detail)
		}
	}
}

// TestCloseWaitsForConnectInFlight: Close does not return while a CONNECT
// it did not refuse is still being handled (here its dial, which ignores
// the request's end, completes only later), and that CONNECT then opens
// no tunnel: the target's connection is closed, nothing is left spooled.
// Close used to return at once, and the late handler started a tunnel and
// a spool on a closed notary (found by the race detector: the handler's
// WaitGroup.Add raced Close's Wait).
func TestCloseWaitsForConnectInFlight(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	dialing, proceed := make(chan struct{}), make(chan struct{})
	spool := t.TempDir()
	n := notarytest.StartNotary(t, notary.Config{
		SpoolDir: spool,
		Dial: func(_ context.Context, network, addr string) (net.Conn, error) {
			close(dialing)
			<-proceed
			return net.Dial(network, addr)
		},
	})
	c, err := net.Dial("tcp", n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT late.test:%s HTTP/1.1\r\nHost: late.test:%[1]s\r\n\r\n", portOf(l.Addr()))
	<-dialing
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case err := <-closed:
		close(proceed)
		t.Fatalf("Close returned (%v) while a CONNECT was in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(proceed)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the CONNECT ended")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect}); err == nil && resp.StatusCode == http.StatusOK {
		t.Fatal("a tunnel was opened by a closed notary")
	}
	select {
	case up := <-accepted:
		up.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := up.Read(make([]byte, 1)); err == nil {
			t.Fatal("the target's connection was not closed")
		}
		up.Close()
	case <-time.After(time.Second):
		// The dial failed: nothing reached the target.
	}
	if ents, err := os.ReadDir(spool); err != nil || len(ents) != 0 {
		t.Fatalf("spool after Close: %d entries, %v", len(ents), err)
	}
}

// TestIdleConnectionsClosed: Serve closes a keep-alive connection left
// idle after a request once IdleTimeout has passed, so that connections a
// client does not close cannot pile up (it had no idle timeout: a
// prover's idle control connections stayed open as long as the prover
// kept them).
func TestIdleConnectionsClosed(t *testing.T) {
	n := notarytest.StartNotary(t, notary.Config{IdleTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A finalize of an unknown session: answered, and the connection kept.
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: notary\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", notary.FinalizePath("unknown"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatalf("the notary closed the connection with its answer (%d); the test needs it kept alive", resp.StatusCode)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF (closed by the notary)", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("idle connection closed after %v, want about 200ms", d)
	}
}
