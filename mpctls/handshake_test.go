package mpctls

import (
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"
)

func hsOpts(t testing.TB) HandshakeOptions {
	return HandshakeOptions{Roots: getPKI(t).roots, SNI: testHost, Now: time.Now()}
}

type goCase struct {
	name    string
	version uint16
	suite   uint16
	ecdsa   bool
	hrr     bool
}

func goCases() []goCase {
	var cs []goCase
	for _, ec := range []bool{false, true} {
		cs = append(cs, goCase{fmt.Sprintf("tls13/AES_128_GCM/ecdsa=%v", ec), tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256, ec, false})
	}
	cs = append(cs, goCase{"tls13/hello-retry", tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256, true, true})
	for _, s := range []uint16{
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	} {
		su, _ := SuiteByID(s)
		cs = append(cs, goCase{"tls12/" + su.Name, tls.VersionTLS12, s, su.ECDSA, false})
	}
	return cs
}

func (c goCase) capture(t testing.TB, resp []byte) *captured {
	p := getPKI(t)
	cert := p.rsa
	if c.ecdsa {
		cert = p.ecdsa
	}
	srv := serverConfig(cert, c.version, c.suite)
	if c.hrr {
		// The client sends key shares for its first preferences only;
		// a server that insists on P-384 must ask again.
		srv.CurvePreferences = []tls.CurveID{tls.CurveP384}
	}
	return captureGo(t, srv, &tls.Config{}, resp)
}

func TestVerifyHandshakeGo(t *testing.T) {
	for _, c := range goCases() {
		t.Run(c.name, func(t *testing.T) {
			cap := c.capture(t, []byte("hello"))
			if cap.state.CipherSuite != c.suite || cap.state.Version != c.version {
				t.Fatalf("negotiated %#x/%#x", cap.state.Version, cap.state.CipherSuite)
			}
			hs, err := VerifyHandshake(cap.records, cap.disclosure(), hsOpts(t))
			if err != nil {
				t.Fatal(err)
			}
			if hs.Version != c.version || hs.CipherSuite != c.suite || hs.SNI != testHost || hs.HelloRetry != c.hrr {
				t.Fatalf("handshake %+v", hs)
			}
			if hs.CertChainDigest != CertChainDigest(cap.state.PeerCertificates) {
				t.Fatal("certificate chain digest")
			}
			if hs.FinishedVerified != (c.version == tls.VersionTLS13) {
				t.Fatal("finished")
			}
			if c.hrr && hs.Group != uint16(tls.CurveP384) {
				t.Fatalf("group %d", hs.Group)
			}
			// The record at ServerProtectedFrom must be the first
			// protected server record of the application epoch.
			var srv []Record
			for _, r := range cap.records {
				if r.Dir == ServerToClient {
					srv = append(srv, r)
				}
			}
			if hs.ServerProtectedFrom == 0 || hs.ServerProtectedFrom >= uint64(len(srv)) || srv[hs.ServerProtectedFrom].Type != RecordApplicationData && c.version == tls.VersionTLS13 {
				t.Fatalf("protected from %d of %d", hs.ServerProtectedFrom, len(srv))
			}
		})
	}
}

func TestVerifyHandshakeRejects(t *testing.T) {
	p := getPKI(t)
	tls13 := goCase{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256, ecdsa: true}.capture(t, []byte("x"))
	tls12 := goCase{version: tls.VersionTLS12, suite: tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}.capture(t, []byte("x"))

	t.Run("wrong secret", func(t *testing.T) {
		d := tls13.disclosure()
		d.ServerHandshakeTrafficSecret = append([]byte(nil), d.ServerHandshakeTrafficSecret...)
		d.ServerHandshakeTrafficSecret[0] ^= 1
		_, err := VerifyHandshake(tls13.records, d, hsOpts(t))
		if !errors.Is(err, ErrDecrypt) {
			t.Fatalf("got %v", err)
		}
		// The client secret is not the server secret.
		d.ServerHandshakeTrafficSecret = tls13.secrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]
		if _, err := VerifyHandshake(tls13.records, d, hsOpts(t)); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("client secret: %v", err)
		}
		if _, err := VerifyHandshake(tls13.records, Disclosure{}, hsOpts(t)); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("no secret: %v", err)
		}
	})
	t.Run("wrong sni", func(t *testing.T) {
		o := hsOpts(t)
		o.SNI = "other.test"
		_, err := VerifyHandshake(tls13.records, tls13.disclosure(), o)
		var he *HandshakeError
		if !errors.Is(err, ErrCertificate) || !errors.As(err, &he) || he.Step != "server name" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unknown ca", func(t *testing.T) {
		for _, c := range []*captured{tls13, tls12} {
			o := hsOpts(t)
			o.Roots = nil
			if _, err := VerifyHandshake(c.records, c.disclosure(), o); !errors.Is(err, ErrCertificate) {
				t.Fatalf("nil roots: %v", err)
			}
			o = hsOpts(t)
			o.Roots.AddCert(p.caCert) // no-op, same CA
			srvCfg := serverConfig(p.unknownCA, c.state.Version, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)
			cap := captureGo(t, srvCfg, &tls.Config{InsecureSkipVerify: true}, []byte("x"))
			if _, err := VerifyHandshake(cap.records, cap.disclosure(), o); !errors.Is(err, ErrCertificate) {
				t.Fatalf("unknown ca: %v", err)
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
			cap := captureGo(t, serverConfig(p.expired, v, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256), &tls.Config{InsecureSkipVerify: true}, []byte("x"))
			if _, err := VerifyHandshake(cap.records, cap.disclosure(), hsOpts(t)); !errors.Is(err, ErrCertificate) {
				t.Fatalf("%#x expired: %v", v, err)
			}
		}
		// The session time matters, not the verifier's clock.
		o := hsOpts(t)
		o.Now = time.Now().Add(48 * time.Hour)
		if _, err := VerifyHandshake(tls13.records, tls13.disclosure(), o); !errors.Is(err, ErrCertificate) {
			t.Fatalf("future session time: %v", err)
		}
		o.Now = time.Time{}
		if _, err := VerifyHandshake(tls13.records, tls13.disclosure(), o); !errors.Is(err, ErrCertificate) {
			t.Fatalf("zero time: %v", err)
		}
	})
	t.Run("flipped bit", func(t *testing.T) {
		for _, c := range []*captured{tls13, tls12} {
			n := handshakeRecords(t, c)
			for i := 0; i < n; i++ {
				r := c.records[i]
				bits := []int{HeaderLen*8 + 3, len(r.Raw)*8 - 1, (len(r.Raw) / 2) * 8}
				if c.state.Version == tls.VersionTLS12 && r.Dir == ClientToServer && r.Seq > 0 {
					continue // the client's key exchange and finished: not the notary's to check
				}
				if c.state.Version == tls.VersionTLS12 && r.Dir == ClientToServer {
					// In TLS 1.2 nothing the notary can check covers the
					// client hello beyond its random (signed in the
					// ServerKeyExchange): flip bits there.
					bits = []int{(HeaderLen + 6) * 8, (HeaderLen+6+31)*8 + 7}
				}
				for _, bit := range bits {
					recs := cloneRecords(c.records)
					recs[i].Raw[bit/8] ^= 1 << (bit % 8)
					if _, err := VerifyHandshake(recs, c.disclosure(), hsOpts(t)); err == nil {
						t.Fatalf("%#x: flipped bit %d of record %d (%s %d) accepted", c.state.Version, bit, i, r.Dir, r.Seq)
					}
				}
			}
		}
	})
	t.Run("reordered dropped duplicated", func(t *testing.T) {
		recs := tls13.records
		swap := cloneRecords(recs)
		swap[1], swap[2] = swap[2], swap[1]
		var drop []Record
		for i, r := range recs {
			if i != 2 {
				drop = append(drop, r)
			}
		}
		dup := append(cloneRecords(recs[:3]), recs[2:]...)
		for name, rs := range map[string][]Record{"swap": swap, "drop": drop, "dup": dup} {
			if _, err := VerifyHandshake(rs, tls13.disclosure(), hsOpts(t)); err == nil {
				t.Errorf("%s accepted", name)
			}
		}
		if _, err := VerifyHandshake(recs[:3], tls13.disclosure(), hsOpts(t)); !errors.Is(err, ErrTruncated) {
			t.Errorf("truncated: %v", err)
		}
	})
	t.Run("tls 1.1", func(t *testing.T) {
		cfg := serverConfig(p.rsa, tls.VersionTLS11, 0)
		cfg.MinVersion = tls.VersionTLS10
		cap := captureGo(t, cfg, &tls.Config{MinVersion: tls.VersionTLS10}, []byte("x"))
		if _, err := VerifyHandshake(cap.records, Disclosure{}, hsOpts(t)); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("cbc suite", func(t *testing.T) {
		cap := captureGo(t, serverConfig(p.rsa, tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA), &tls.Config{}, []byte("x"))
		if _, err := VerifyHandshake(cap.records, Disclosure{}, hsOpts(t)); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("resumption", func(t *testing.T) {
		for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
			srv := serverConfig(p.ecdsa, v, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)
			cli := &tls.Config{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
			// The first, full handshake issues a ticket (in the clear
			// before ChangeCipherSpec in TLS 1.2) and verifies.
			first := captureGo(t, srv, cli, []byte("x"))
			if _, err := VerifyHandshake(first.records, first.disclosure(), hsOpts(t)); err != nil {
				t.Fatalf("%#x: full handshake with ticket: %v", v, err)
			}
			cap := captureGo(t, srv, cli, []byte("x"))
			if !cap.state.DidResume {
				t.Fatal("setup: session not resumed")
			}
			if _, err := VerifyHandshake(cap.records, cap.disclosure(), hsOpts(t)); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("%#x: got %v", v, err)
			}
		}
	})
	t.Run("tls12 with a secret", func(t *testing.T) {
		if _, err := VerifyHandshake(tls12.records, Disclosure{ServerHandshakeTrafficSecret: []byte{1}}, hsOpts(t)); !errors.Is(err, ErrHandshake) {
			t.Fatalf("got %v", err)
		}
	})
}

// handshakeRecords returns how many leading records VerifyHandshake reads.
func handshakeRecords(t *testing.T, c *captured) int {
	hs, err := VerifyHandshake(c.records, c.disclosure(), hsOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range c.records {
		if r.Dir == ServerToClient && r.Seq == hs.ServerProtectedFrom-1 {
			return i + 1
		}
	}
	t.Fatal("no handshake end")
	return 0
}

func cloneRecords(rs []Record) []Record {
	out := make([]Record, len(rs))
	for i, r := range rs {
		r.Raw = append([]byte(nil), r.Raw...)
		out[i] = r
	}
	return out
}

// withExtension returns a copy of a ClientHello record with an extra empty
// extension appended and every length fixed up.
func withExtension(t *testing.T, r Record, ext uint16) Record {
	t.Helper()
	raw := append([]byte(nil), r.Raw...)
	body := raw[HeaderLen+4:]
	off := 2 + 32
	off += 1 + int(body[off])                         // session id
	off += 2 + (int(body[off])<<8 | int(body[off+1])) // cipher suites
	off += 1 + int(body[off])                         // compression
	extLen := int(body[off])<<8 | int(body[off+1])
	if off+2+extLen != len(body) {
		t.Fatal("client hello does not end with its extensions")
	}
	raw = append(raw, byte(ext>>8), byte(ext), 0, 0)
	put16 := func(at, v int) { raw[at], raw[at+1] = byte(v>>8), byte(v) }
	put16(HeaderLen+4+off, extLen+4)
	put16(3, len(raw)-HeaderLen)
	hl := len(raw) - HeaderLen - 4
	raw[HeaderLen+1], raw[HeaderLen+2], raw[HeaderLen+3] = byte(hl>>16), byte(hl>>8), byte(hl)
	r.Raw = raw
	return r
}

func TestVerifyHandshakeRefusesPSKAndEarlyData(t *testing.T) {
	cap := goCase{version: tls.VersionTLS13, suite: tls.TLS_AES_128_GCM_SHA256, ecdsa: true}.capture(t, []byte("x"))
	for _, ext := range []uint16{extEarlyData, extPreSharedKey} {
		recs := cloneRecords(cap.records)
		recs[0] = withExtension(t, recs[0], ext)
		_, err := VerifyHandshake(recs, cap.disclosure(), hsOpts(t))
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("extension %d: got %v", ext, err)
		}
	}
	// A harmless unknown extension only breaks the transcript.
	recs := cloneRecords(cap.records)
	recs[0] = withExtension(t, recs[0], 0xfafa)
	if _, err := VerifyHandshake(recs, cap.disclosure(), hsOpts(t)); !errors.Is(err, ErrHandshakeSignature) {
		t.Fatalf("unknown extension: got %v", err)
	}
	// A duplicated extension is malformed.
	recs[0] = withExtension(t, recs[0], 0xfafa)
	if _, err := VerifyHandshake(recs, cap.disclosure(), hsOpts(t)); !errors.Is(err, ErrHandshake) {
		t.Fatalf("duplicate extension: got %v", err)
	}
}
