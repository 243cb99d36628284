package prover

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// startTamperingNotary runs a real notary whose finalize answers pass
// through tamper before they reach the prover: a notary that lies.
func startTamperingNotary(t *testing.T, roots *notarytest.CA, tamper func(*notary.FinalizeResponse, ed25519.PrivateKey)) *notarytest.Notary {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	n, err := notary.New(notary.Config{Key: priv, Roots: roots.Pool(), Resolver: notarytest.LoopbackResolver{}, AllowAddr: notarytest.LoopbackOnly, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	inner := n.Handler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/finalize") {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		var resp notary.FinalizeResponse
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &resp) != nil {
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		tamper(&resp, priv)
		json.NewEncoder(w).Encode(resp)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close(); n.Close() })
	return &notarytest.Notary{Notary: n, Addr: l.Addr().String(), Key: n.PublicKey(), Priv: priv}
}

// resign parses a statement, lets edit change it and signs it again.
func resign(t *testing.T, b []byte, key ed25519.PrivateKey, edit func(*mpctls.Statement)) []byte {
	st, err := mpctls.ParseStatement(b)
	if err != nil {
		t.Fatal(err)
	}
	edit(st)
	out, err := st.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestProverRejectsLyingNotary(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "lie.test"
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, servePayload())
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	cases := []struct {
		name   string
		tamper func(*testing.T, *notary.FinalizeResponse, ed25519.PrivateKey)
		want   error
	}{
		{"other root", func(t *testing.T, r *notary.FinalizeResponse, k ed25519.PrivateKey) {
			r.Statement = resign(t, r.Statement, k, func(s *mpctls.Statement) { s.Root[0] ^= 1 })
		}, ErrMismatch},
		{"other session", func(t *testing.T, r *notary.FinalizeResponse, k ed25519.PrivateKey) {
			r.Statement = resign(t, r.Statement, k, func(s *mpctls.Statement) { s.SessionID[0] ^= 1 })
		}, ErrMismatch},
		{"other counts", func(t *testing.T, r *notary.FinalizeResponse, k ed25519.PrivateKey) {
			r.Statement = resign(t, r.Statement, k, func(s *mpctls.Statement) { s.ServerBytes-- })
		}, ErrMismatch},
		{"other chain", func(t *testing.T, r *notary.FinalizeResponse, k ed25519.PrivateKey) {
			r.Statement = resign(t, r.Statement, k, func(s *mpctls.Statement) { s.CertChainDigest[0] ^= 1 })
		}, ErrMismatch},
		{"other sni", func(t *testing.T, r *notary.FinalizeResponse, k ed25519.PrivateKey) {
			r.Statement = resign(t, r.Statement, k, func(s *mpctls.Statement) { s.SNI = "elsewhere.test" })
		}, mpctls.ErrExpectation},
		{"stale time", func(t *testing.T, r *notary.FinalizeResponse, k ed25519.PrivateKey) {
			r.Statement = resign(t, r.Statement, k, func(s *mpctls.Statement) { s.Start = s.Start.Add(-time.Hour) })
		}, mpctls.ErrExpectation},
		{"untrusted key", func(t *testing.T, r *notary.FinalizeResponse, _ ed25519.PrivateKey) {
			r.Statement = resign(t, r.Statement, stranger, func(*mpctls.Statement) {})
		}, mpctls.ErrSignature},
		{"flipped signature", func(t *testing.T, r *notary.FinalizeResponse, _ ed25519.PrivateKey) {
			r.Statement = bytes.Clone(r.Statement)
			r.Statement[len(r.Statement)-1] ^= 1
		}, mpctls.ErrSignature},
		{"other order", func(t *testing.T, r *notary.FinalizeResponse, _ ed25519.PrivateKey) {
			r.Order = append(mpctls.Order{0}, r.Order...)
			r.Order = append(r.Order, 0)
			r.Order[1], r.Order[2] = r.Order[2], r.Order[1]
		}, ErrMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := startTamperingNotary(t, ca, func(r *notary.FinalizeResponse, k ed25519.PrivateKey) { c.tamper(t, r, k) })
			_, err := tryFetch(n, ca.Pool(), host, port, nil, "/x")
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// notarizedConn dials through the notary, runs one request and closes,
// returning the session ready for a hand-made finalize request.
func notarizedConn(t *testing.T, n *notarytest.Notary, ca *notarytest.CA, host, port string, cfg *tls.Config) *Session {
	t.Helper()
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	cfg.RootCAs = ca.Pool()
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: cfg}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
	if err := get(&http.Client{Transport: tr}, "https://"+host+":"+port+"/payload?n=30000", 30000); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	s := d.Sessions()[0]
	<-s.capture.closed
	<-s.verified
	return s
}

func TestNotaryRejectsWrongSecret(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "secret.test"
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, servePayload())
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	s := notarizedConn(t, n, ca, host, port, nil)
	client, server := s.capture.records()
	wrong := bytes.Clone(s.skeys.handshake)
	wrong[0] ^= 1
	_, err := s.post(context.Background(), notary.FinalizeRequest{ServerHandshakeTrafficSecret: wrong, ClientRecords: uint64(len(client)), ServerRecords: uint64(len(server))})
	var ne *NotaryError
	if !errors.As(err, &ne) || ne.Status != http.StatusUnprocessableEntity || !strings.Contains(ne.Detail, "authentication") {
		t.Fatalf("wrong secret: %v, want 422 naming the failed record authentication", err)
	}
	// The session is gone after one finalize attempt.
	_, err = s.post(context.Background(), notary.FinalizeRequest{ServerHandshakeTrafficSecret: s.skeys.handshake, ClientRecords: 1, ServerRecords: 1})
	if !errors.As(err, &ne) || ne.Status != http.StatusNotFound {
		t.Fatalf("second finalize: %v, want 404", err)
	}
}

func TestNotaryRejectsInflatedCounts(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "count.test"
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, servePayload())
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	s := notarizedConn(t, n, ca, host, port, nil)
	client, server := s.capture.records()
	_, err := s.post(context.Background(), notary.FinalizeRequest{ServerHandshakeTrafficSecret: s.skeys.handshake, ClientRecords: uint64(len(client)), ServerRecords: uint64(len(server)) + 1})
	var ne *NotaryError
	if !errors.As(err, &ne) || ne.Status != http.StatusBadRequest {
		t.Fatalf("inflated count: %v, want 400", err)
	}
}

// TestStatementOverPrefix asks for fewer server records than were relayed
// (as when the prover never read the server's last record): the notary
// rebuilds the tree from its spool over exactly that prefix.
func TestStatementOverPrefix(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "prefix.test"
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, servePayload())
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			s := notarizedConn(t, n, ca, host, port, &tls.Config{MaxVersion: v})
			client, server := s.capture.records()
			server = server[:len(server)-1]
			req := notary.FinalizeRequest{ClientRecords: uint64(len(client)), ServerRecords: uint64(len(server))}
			if v == tls.VersionTLS13 {
				req.ServerHandshakeTrafficSecret = s.skeys.handshake
			}
			resp, err := s.post(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			st, err := mpctls.VerifyStatement(resp.Statement, []ed25519.PublicKey{n.Key}, mpctls.Expect{SNI: host})
			if err != nil {
				t.Fatal(err)
			}
			if st.ServerRecords != uint64(len(server)) || st.ClientRecords != uint64(len(client)) {
				t.Fatalf("statement counts %d/%d, want %d/%d", st.ClientRecords, st.ServerRecords, len(client), len(server))
			}
			recs, err := mpctls.Interleave(client, server, resp.Order)
			if err != nil {
				t.Fatal(err)
			}
			tree, err := mpctls.NewTree(recs)
			if err != nil {
				t.Fatal(err)
			}
			if tree.Root() != st.Root {
				t.Fatal("prefix root does not match the prover's records")
			}
		})
	}
}

func TestSessionByteLimit(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "limit.test"
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, servePayload())
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool(), MaxSessionBytes: 64 << 10})
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
	if err := get(&http.Client{Transport: tr}, "https://"+host+":"+port+"/payload?n=1000000", 1000000); err == nil {
		t.Fatal("a 1 MB response passed a 64 KiB session limit")
	}
	tr.CloseIdleConnections()
	_, err := d.FinalizeAll(context.Background())
	if !errors.Is(err, ErrNotary) && !errors.Is(err, ErrIncomplete) {
		t.Fatalf("finalize of a cut session: %v", err)
	}
	if n.Sessions() != 0 {
		t.Fatalf("notary still holds %d sessions", n.Sessions())
	}
}

// TestNotaryClockAndRoots: the notary checks the certificate with its own
// roots at its own (injected) clock, and stamps statements with it.
func TestNotaryClockAndRoots(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "clock.test"
	cert := ca.Issue(t, notarytest.ECDSA, host)
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{cert}}, servePayload())

	pinned := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	infos := make(chan notary.SessionInfo, 1)
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool(), Now: func() time.Time { return pinned },
		SessionDone: func(i notary.SessionInfo) { infos <- i }})
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}, Now: func() time.Time { return pinned }}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
	if err := get(&http.Client{Transport: tr}, "https://"+host+":"+port+"/payload?n=10", 10); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	res, err := d.FinalizeAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Parsed.Start.Equal(pinned) || !res[0].Parsed.End.Equal(pinned) {
		t.Fatalf("statement times %v–%v, want the notary's clock %v", res[0].Parsed.Start, res[0].Parsed.End, pinned)
	}
	if i := <-infos; !i.Signed || i.Err != nil || i.ID != res[0].SessionID || i.ServerBytes != res[0].Parsed.ServerBytes || i.ClientBytes != res[0].Parsed.ClientBytes {
		t.Fatalf("session report %+v does not match the statement", i)
	}

	for name, cfg := range map[string]notary.Config{
		"expired at session time": {Roots: ca.Pool(), Now: func() time.Time { return cert.Leaf.NotAfter.Add(time.Hour) }},
		"unknown CA":              {Roots: notarytest.NewCA(t).Pool()},
	} {
		t.Run(name, func(t *testing.T) {
			n := notarytest.StartNotary(t, cfg)
			_, err := tryFetch(n, ca.Pool(), host, port, nil, "/x")
			var ne *NotaryError
			if !errors.As(err, &ne) || ne.Status != http.StatusUnprocessableEntity || !strings.Contains(ne.Detail, "certificate") {
				t.Fatalf("got %v, want a 422 certificate failure", err)
			}
		})
	}
}

// TestSpoolLifecycle: while a session runs its records are spooled to a
// file (the notary does not hold them in memory); finalizing removes it.
func TestSpoolLifecycle(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "spool.test"
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, servePayload())
	dir := t.TempDir()
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool(), SpoolDir: dir})
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
	const size = 3 << 20
	if err := get(&http.Client{Transport: tr}, "https://"+host+":"+port+"/payload?n=3145728", size); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	<-d.Sessions()[0].capture.closed
	var spooled int64
	deadline := time.Now().Add(5 * time.Second)
	for spooled < size && time.Now().Before(deadline) {
		entries, _ := os.ReadDir(dir)
		spooled = 0
		for _, e := range entries {
			if fi, err := e.Info(); err == nil {
				spooled += fi.Size()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if spooled < size {
		t.Fatalf("spool holds %d bytes for a %d-byte response", spooled, size)
	}
	if _, err := d.FinalizeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The notary answers finalize first and removes the spool right after
	// (so the prover does not wait on the unlink): give it a moment.
	left := -1
	for deadline := time.Now().Add(5 * time.Second); left != 0 && time.Now().Before(deadline); {
		entries, _ := os.ReadDir(dir)
		if left = len(entries); left != 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if left != 0 {
		t.Fatalf("%d spool files left after finalize", left)
	}
}

func TestDialRefusesIPAddress(t *testing.T) {
	d := &Dialer{Notary: "127.0.0.1:1"}
	if _, err := d.DialTLSContext(context.Background(), "tcp", "127.0.0.1:443"); err == nil || !strings.Contains(err.Error(), "DNS name") {
		t.Fatalf("dial to an IP address: %v", err)
	}
	if _, err := d.DialTLSContext(context.Background(), "udp", "x.test:443"); err == nil {
		t.Fatal("udp accepted")
	}
}

func TestProverByteLimit(t *testing.T) {
	ca := notarytest.NewCA(t)
	const host = "plimit.test"
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, servePayload())
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	d := &Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}, MaxSessionBytes: 64 << 10}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext}
	if err := get(&http.Client{Transport: tr}, "https://"+host+":"+port+"/payload?n=1000000", 1000000); err == nil {
		t.Fatal("a 1 MB response passed a 64 KiB prover limit")
	}
	tr.CloseIdleConnections()
	if _, err := d.FinalizeAll(context.Background()); !errors.Is(err, ErrLimit) {
		t.Fatalf("finalize of a session over the prover's limit: %v, want ErrLimit", err)
	}
}

// TestCheckServerName: an IP address in any form is refused with
// ErrNotServerName, a DNS name is not; DialTLSContext applies the same rule
// before it contacts the notary.
func TestCheckServerName(t *testing.T) {
	for _, h := range []string{"93.184.216.34", "::1", "[2001:db8::1]", "fe80::1%eth0"} {
		if err := CheckServerName(h); !errors.Is(err, ErrNotServerName) {
			t.Errorf("CheckServerName(%q) = %v", h, err)
		}
	}
	for _, h := range []string{"portal.example", "localhost", "xn--bcher-kva.example"} {
		if err := CheckServerName(h); err != nil {
			t.Errorf("CheckServerName(%q) = %v", h, err)
		}
	}
	d := &Dialer{Notary: "127.0.0.1:1", DialNotary: func(context.Context, string, string) (net.Conn, error) {
		t.Fatal("the notary was dialled for an IP address")
		return nil, nil
	}}
	if _, err := d.DialTLSContext(context.Background(), "tcp", "93.184.216.34:443"); !errors.Is(err, ErrNotServerName) {
		t.Errorf("DialTLSContext to an IP address: %v", err)
	}
}
