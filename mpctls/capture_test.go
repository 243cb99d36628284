package mpctls

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Test PKI: one CA, leaf certificates for testHost with RSA and ECDSA keys,
// an expired leaf, and a leaf from a CA nobody trusts.
const testHost = "portal.test"

var sessionTime = time.Now()

type testPKI struct {
	roots      *x509.CertPool
	rsa, ecdsa tls.Certificate
	expired    tls.Certificate
	unknownCA  tls.Certificate
	caCert     *x509.Certificate
}

var (
	pkiOnce sync.Once
	pki     *testPKI
)

func getPKI(t testing.TB) *testPKI {
	t.Helper()
	pkiOnce.Do(func() {
		caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ca := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mpctls test CA"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		caDER, _ := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
		caCert, _ := x509.ParseCertificate(caDER)
		otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		otherDER, _ := x509.CreateCertificate(rand.Reader, ca, ca, &otherKey.PublicKey, otherKey)
		otherCA, _ := x509.ParseCertificate(otherDER)

		leaf := func(key any, pub any, signer *x509.Certificate, signerKey any, nb, na time.Time) tls.Certificate {
			tmpl := &x509.Certificate{
				SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: testHost},
				DNSNames: []string{testHost}, NotBefore: nb, NotAfter: na,
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, pub, signerKey)
			if err != nil {
				panic(err)
			}
			return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
		}
		rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
		ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		now := time.Now()
		p := &testPKI{roots: x509.NewCertPool(), caCert: caCert}
		p.roots.AddCert(caCert)
		p.rsa = leaf(rsaKey, &rsaKey.PublicKey, caCert, caKey, now.Add(-time.Hour), now.Add(time.Hour))
		p.ecdsa = leaf(ecKey, &ecKey.PublicKey, caCert, caKey, now.Add(-time.Hour), now.Add(time.Hour))
		p.expired = leaf(ecKey, &ecKey.PublicKey, caCert, caKey, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
		p.unknownCA = leaf(ecKey, &ecKey.PublicKey, otherCA, otherKey, now.Add(-time.Hour), now.Add(time.Hour))
		pki = p
	})
	return pki
}

// recordingConn is the test's stand-in for the notary: it sees both
// directions of a client connection and keeps the bytes in arrival order.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	chunks []chunk
}

type chunk struct {
	dir  Direction
	data []byte
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		c.chunks = append(c.chunks, chunk{ServerToClient, append([]byte(nil), b[:n]...)})
		c.mu.Unlock()
	}
	return n, err
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.chunks = append(c.chunks, chunk{ClientToServer, append([]byte(nil), b...)})
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// records splits the recorded chunks into records in arrival order: a
// record arrives when its last byte does.
func (c *recordingConn) records(t testing.TB) []Record {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var pending [3][]byte
	var seq [3]uint64
	var out []Record
	for _, ch := range c.chunks {
		pending[ch.dir] = append(pending[ch.dir], ch.data...)
		for {
			p := pending[ch.dir]
			if len(p) < HeaderLen {
				break
			}
			n := HeaderLen + int(binary.BigEndian.Uint16(p[3:5]))
			if len(p) < n {
				break
			}
			raw := append([]byte(nil), p[:n]...)
			out = append(out, Record{Dir: ch.dir, Seq: seq[ch.dir], Type: raw[0], Version: binary.BigEndian.Uint16(raw[1:3]), Raw: raw})
			seq[ch.dir]++
			pending[ch.dir] = p[n:]
		}
	}
	for d, p := range pending {
		if len(p) != 0 {
			t.Fatalf("%s stream ends inside a record", Direction(d))
		}
	}
	return out
}

// session is one captured TLS session.
type captured struct {
	records  []Record
	secrets  map[string][]byte // key log label → secret
	state    tls.ConnectionState
	response []byte
}

// serve answers one request on a TLS connection: it reads a line and
// writes resp, then closes with close_notify.
func serve(conn net.Conn, resp []byte) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	if _, err := br.ReadString('\n'); err != nil {
		return
	}
	for len(resp) > 0 {
		n := min(len(resp), 40000)
		if _, err := conn.Write(resp[:n]); err != nil {
			return
		}
		resp = resp[n:]
	}
}

// captureGo runs one session between a crypto/tls client and a crypto/tls
// server on loopback and returns what a notary would have recorded plus the
// client's key log.
func captureGo(t testing.TB, srv *tls.Config, cli *tls.Config, resp []byte) *captured {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		serve(c, resp)
	}()
	return captureClient(t, ln.Addr().String(), cli)
}

func captureClient(t testing.TB, addr string, cli *tls.Config) *captured {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(20 * time.Second))
	rc := &recordingConn{Conn: raw}
	var keylog bytes.Buffer
	cfg := cli.Clone()
	cfg.KeyLogWriter = &keylog
	if cfg.ServerName == "" {
		cfg.ServerName = testHost
	}
	if cfg.RootCAs == nil {
		cfg.RootCAs = getPKI(t).roots
	}
	tc := tls.Client(rc, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if _, err := tc.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(tc)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	tc.Close()
	c := &captured{records: rc.records(t), secrets: map[string][]byte{}, state: tc.ConnectionState(), response: body}
	for _, line := range strings.Split(keylog.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 {
			c.secrets[f[0]], _ = hex.DecodeString(f[2])
		}
	}
	return c
}

func (c *captured) disclosure() Disclosure {
	return Disclosure{ServerHandshakeTrafficSecret: c.secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"]}
}

func serverConfig(cert tls.Certificate, version uint16, suite uint16) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: version, MaxVersion: version}
	if version == tls.VersionTLS12 {
		cfg.CipherSuites = []uint16{suite}
	}
	return cfg
}
