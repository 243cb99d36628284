package twoparty

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
)

const testHost = "portal.test"

type testPKI struct {
	roots      *x509.CertPool
	ecdsa, rsa tls.Certificate
}

var (
	pkiOnce sync.Once
	pki     *testPKI
)

func getPKI(t testing.TB) *testPKI {
	pkiOnce.Do(func() {
		caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ca := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "twoparty test CA"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, _ := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
		caCert, _ := x509.ParseCertificate(der)
		leaf := func(key any, pub any) tls.Certificate {
			tmpl := &x509.Certificate{
				SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: testHost},
				DNSNames: []string{testHost}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, pub, caKey)
			if err != nil {
				panic(err)
			}
			return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
		}
		ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		rk, _ := rsa.GenerateKey(rand.Reader, 2048)
		pki = &testPKI{roots: x509.NewCertPool(), ecdsa: leaf(ec, &ec.PublicKey), rsa: leaf(rk, &rk.PublicKey)}
		pki.roots.AddCert(caCert)
	})
	return pki
}

// keyLog collects a TLS server's key log lines.
type keyLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (k *keyLog) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.b.Write(p)
}

// secret returns the key log's secret for label (the first line of it).
func (k *keyLog) secret(t testing.TB, label string) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, line := range strings.Split(k.b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == label {
			b, _ := hex.DecodeString(f[2])
			return b
		}
	}
	t.Fatalf("no %s in the server's key log", label)
	return nil
}

// startServer runs a crypto/tls HTTPS server on loopback with cfg and a
// key log, answering every request with its path and a body of n bytes.
func startServer(t testing.TB, cfg *tls.Config) (addr string, log *keyLog) {
	t.Helper()
	log = &keyLog{}
	cfg = cfg.Clone()
	cfg.KeyLogWriter = log
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Query().Get("n"), "%d", &n)
		fmt.Fprintf(w, "path %s;", r.URL.Path)
		w.Write(bytes.Repeat([]byte("x"), n))
	}), ErrorLog: nil}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), log
}

// session is one MPC-mode session over the ideal engine, in process.
type session struct {
	relay   *testRelay
	hub     *idealHub
	conn    *Conn
	outcome chan outcomeOrErr
}

type outcomeOrErr struct {
	o   *Outcome
	err error
}

func startSession(t testing.TB, server string, cfg Config) *session {
	return startSessionWith(t, server, cfg, func(r *testRelay) Relay { return r })
}

// startSessionWith is startSession with the notary's side on the relay
// wrap returns.
func startSessionWith(t testing.TB, server string, cfg Config, wrap func(*testRelay) Relay) *session {
	t.Helper()
	relay := startRelay(t, server)
	pe, ne, hub := idealPair()
	tunnel, err := net.Dial("tcp", relay.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	n := newNotary(ne, ne.messages(), wrap(relay), NotaryConfig{Roots: getPKI(t).roots})
	out := make(chan outcomeOrErr, 1)
	go func() {
		o, err := n.Serve(ctx)
		out <- outcomeOrErr{o, err}
	}()
	cfg.ServerName = testHost
	cfg.RootCAs = getPKI(t).roots
	cfg.SessionID = relay.sid
	cfg.NotaryKeys = []ed25519.PublicKey{relay.pub}
	return &session{relay: relay, hub: hub, conn: newConn(tunnel, pe, pe.messages(), cfg), outcome: out}
}

// get sends a GET on c and returns the response body.
func get(t testing.TB, c net.Conn, path string) string {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, testHost); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKeysEqualCryptoTLS runs MPC-mode sessions against a crypto/tls
// server over the ideal engine and checks every secret the two-party
// computation gives — the handshake traffic secrets, CATS, SATS₀, the
// TLS 1.2 server key — against the server's key log, with two requests
// per session (two server key epochs in TLS 1.3).
func TestKeysEqualCryptoTLS(t *testing.T) {
	cases := []struct {
		name    string
		cert    func(*testPKI) tls.Certificate
		version uint16
		suite   uint16
	}{
		{"tls13-aes128-ecdsa", func(p *testPKI) tls.Certificate { return p.ecdsa }, tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256},
		{"tls13-chacha20-rsa", func(p *testPKI) tls.Certificate { return p.rsa }, tls.VersionTLS13, tls.TLS_CHACHA20_POLY1305_SHA256},
		{"tls12-ecdsa-aes128", func(p *testPKI) tls.Certificate { return p.ecdsa }, tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{"tls12-rsa-aes128", func(p *testPKI) tls.Certificate { return p.rsa }, tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{Certificates: []tls.Certificate{tc.cert(getPKI(t))}, MinVersion: tc.version, MaxVersion: tc.version}
			if tc.version == tls.VersionTLS12 {
				cfg.CipherSuites = []uint16{tc.suite}
			}
			addr, log := startServer(t, cfg)
			s := startSession(t, addr, Config{QuietTimeout: 300 * time.Millisecond, Suites: []uint16{tc.suite}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.conn.Handshake(ctx); err != nil {
				t.Fatal(err)
			}
			st := s.conn.ConnectionState()
			if st.Version != tc.version || st.CipherSuite != tc.suite {
				t.Fatalf("negotiated %#04x/%#04x", st.Version, st.CipherSuite)
			}
			if got := get(t, s.conn, "/first?n=100"); got != "path /first;"+strings.Repeat("x", 100) {
				t.Fatalf("first response %q", got)
			}
			if tc.version == tls.VersionTLS13 {
				if got := get(t, s.conn, "/second?n=20000"); got != "path /second;"+strings.Repeat("x", 20000) {
					t.Fatalf("second response of %d bytes", len(got))
				}
			}
			s.conn.Close()
			sec, err := s.conn.Finish(ctx)
			if err != nil {
				t.Fatal(err)
			}
			o := <-s.outcome
			if o.err != nil {
				t.Fatalf("notary side: %v", o.err)
			}
			if tc.version == tls.VersionTLS13 {
				toP, toBoth := s.hub.openedTo(toProver), s.hub.openedTo(toBoth)
				// Opened to the prover, in order: CHTS (and the check bit), CATS, then the
				// epochs' keys and SATS₀; to both: the HS inner midstate,
				// SHTS ‖ derived's inner midstate, …
				eq(t, "CHTS", toP[0][:32], log.secret(t, "CLIENT_HANDSHAKE_TRAFFIC_SECRET"))
				eq(t, "CATS", toP[1], log.secret(t, "CLIENT_TRAFFIC_SECRET_0"))
				eq(t, "SHTS", toBoth[1][:32], log.secret(t, "SERVER_HANDSHAKE_TRAFFIC_SECRET"))
				eq(t, "SHTS (client's)", sec.ServerHandshakeTrafficSecret, log.secret(t, "SERVER_HANDSHAKE_TRAFFIC_SECRET"))
				eq(t, "SATS₀", sec.ServerSecret, log.secret(t, "SERVER_TRAFFIC_SECRET_0"))
				if len(o.o.Reveals) < 2 {
					t.Fatalf("%d reveals for two responses", len(o.o.Reveals))
				}
			} else {
				kx, err := mpctls.ParseKeyExchange(o.o.handshakeRecords(s))
				if err != nil {
					t.Fatal(err)
				}
				suite, _ := mpctls.SuiteByID(tc.suite)
				key, iv, err := mpctls.ServerWriteKey12(suite, log.secret(t, "CLIENT_RANDOM"), kx.ClientRandom[:], kx.ServerRandom[:])
				if err != nil {
					t.Fatal(err)
				}
				eq(t, "server write key and iv", sec.ServerSecret, append(key, iv...))
			}
			for i, cp := range sec.Checkpoints {
				if cp.ServerRecords != o.o.Reveals[i] || cp.Epoch != uint32(i) {
					t.Fatalf("checkpoint %d says epoch %d at %d, the notary's reveals %v", i, cp.Epoch, cp.ServerRecords, o.o.Reveals)
				}
			}
		})
	}
}

func (o *Outcome) handshakeRecords(s *session) []mpctls.Record {
	hs, _, _, _ := s.relay.Snapshot()
	return hs
}

func eq(t testing.TB, name string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: two-party %x, crypto/tls %x", name, got, want)
	}
}

// TestCircuitSizes pins the key schedule's size: 18 SHA-256 compressions
// for TLS 1.3 through the first server key, 5 per further epoch, 16 and
// one AES block for TLS 1.2 — each about 22,600 AND gates, fewer where
// inputs are constants — plus the checks of the notary's inputs.
func TestCircuitSizes(t *testing.T) {
	const comp = 22573
	for _, c := range []struct {
		name     string
		ands     int
		min, max int
	}{
		{"tls13", SessionANDs(mpctls.VersionTLS13), 15 * comp, 18*comp + 2000},
		{"epoch", EpochANDs(), 4 * comp, 5 * comp},
		{"tls12", SessionANDs(mpctls.VersionTLS12), 14 * comp, 16*comp + 7000 + 4000},
	} {
		t.Logf("%s: %d AND gates (%.1f compressions), %.1f MB garbled at 32 B per gate", c.name, c.ands, float64(c.ands)/comp, float64(c.ands)*32/1e6)
		if c.ands < c.min || c.ands > c.max {
			t.Errorf("%s: %d AND gates, want %d..%d", c.name, c.ands, c.min, c.max)
		}
	}
}
