package mpctls

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"io"
	"testing"
	"time"
)

var sentinels = []error{
	ErrNotTLS, ErrUnknownRecordType, ErrRecordTooLarge, ErrMalformedRecord, ErrTruncated, ErrSequence,
	ErrProof, ErrStatement, ErrSignature, ErrExpectation, ErrUnsupported, ErrHandshake, ErrCertificate,
	ErrHandshakeSignature, ErrFinished, ErrDecrypt, ErrPresentation, ErrTooLarge,
}

func typed(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func FuzzRecordReader(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), false)
	f.Add(append(rec(ClientToServer, 0, RecordHandshake, []byte{1, 0, 0, 0}).Raw, 23, 3, 3, 0, 1, 9), true)
	f.Fuzz(func(t *testing.T, data []byte, server bool) {
		dir := ClientToServer
		if server {
			dir = ServerToClient
		}
		rr := NewRecordReader(bytes.NewReader(data), dir)
		var tr Transcript
		total := 0
		for i := 0; ; i++ {
			r, err := rr.Next()
			if err == io.EOF {
				if total != len(data) {
					t.Fatalf("clean end after %d of %d bytes", total, len(data))
				}
				break
			}
			if err != nil {
				if !typed(err) {
					t.Fatalf("untyped error %v", err)
				}
				break
			}
			if r.Seq != uint64(i) || r.Dir != dir || len(r.Fragment()) == 0 || len(r.Fragment()) > MaxFragment {
				t.Fatalf("bad record %+v", r)
			}
			if err := tr.Add(r); err != nil {
				t.Fatalf("reader returned a record the transcript refuses: %v", err)
			}
			total += len(r.Raw)
		}
	})
}

func FuzzParseStatement(f *testing.F) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	st := testStatement()
	st.CertSubject = "" // the committed corpus's valid statement predates the subject
	good, err := st.Sign(key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatement(b)
		if err != nil {
			if !typed(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if err := s.check(); err != nil || !bytes.Equal(s.Raw(), b) {
			t.Fatalf("parsed an ill-formed statement: %v", err)
		}
		v, err := VerifyStatement(b, trusted, Expect{})
		if err == nil && !bytes.Equal(b, good) {
			// Ed25519 and canonical CBOR leave one valid encoding.
			t.Fatalf("a different statement verified: %+v", v)
		}
	})
}

// fixedSession is a deterministic KeyUpdate session and its statement for
// FuzzPresentation, so the committed corpus stays valid.
func fixedSession(t testing.TB) (stmt []byte, trusted []ed25519.PublicKey, good []byte) {
	s, _ := SuiteByID(0x1301)
	secret := bytes.Repeat([]byte{0x5a}, 32)
	var recs []Record
	recs = append(recs, rec(ClientToServer, 0, RecordHandshake, []byte{1, 0, 0, 0}))
	recs = append(recs, rec(ServerToClient, 0, RecordHandshake, []byte{2, 0, 0, 0}))
	cur := secret
	recs = append(recs, Record{Dir: ServerToClient, Seq: 1, Type: 23, Version: 0x0303, Raw: seal13(t, s, cur, 0, RecordApplicationData, []byte("epoch 0"))})
	recs = append(recs, Record{Dir: ServerToClient, Seq: 2, Type: 23, Version: 0x0303, Raw: seal13(t, s, cur, 1, RecordHandshake, []byte{24, 0, 0, 1, 0})})
	cur, _ = NextTrafficSecret(s, cur)
	recs = append(recs, Record{Dir: ServerToClient, Seq: 3, Type: 23, Version: 0x0303, Raw: seal13(t, s, cur, 0, RecordApplicationData, []byte("epoch 1"))})
	recs = append(recs, Record{Dir: ServerToClient, Seq: 4, Type: 23, Version: 0x0303, Raw: seal13(t, s, cur, 1, RecordAlert, []byte{1, 0})})
	var tr Transcript
	for _, r := range recs {
		if err := tr.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &Statement{SessionID: [16]byte{9}, Start: start, End: start.Add(time.Second), SNI: testHost, Address: "127.0.0.1:443",
		Version: VersionTLS13, CipherSuite: 0x1301, CertChainDigest: [32]byte{1}, Root: tr.Root(),
		ClientRecords: tr.Records(ClientToServer), ClientBytes: tr.Bytes(ClientToServer),
		ServerRecords: tr.Records(ServerToClient), ServerBytes: tr.Bytes(ServerToClient)}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32))
	stmt, err := st.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	p, err := BuildPresentation(recs, stmt, secret, []uint64{1, 3}, []uint64{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	good, err = p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return stmt, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, good
}

func FuzzPresentation(f *testing.F) {
	stmt, trusted, good := fixedSession(f)
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Presentation
		if err := p.Unmarshal(b); err != nil {
			if !typed(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		d, err := VerifyPresentation(stmt, &p, trusted)
		if err != nil {
			if !typed(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Whatever verifies must be the session's real plaintext.
		want := map[uint64]string{1: "epoch 0", 2: "\x18\x00\x00\x01\x00", 3: "epoch 1", 4: "\x01\x00"}
		for _, r := range d.Records {
			if string(r.Plaintext) != want[r.Seq] {
				t.Fatalf("record %d verified with plaintext %q", r.Seq, r.Plaintext)
			}
		}
	})
}

func TestFixedSessionPresentation(t *testing.T) {
	stmt, trusted, good := fixedSession(t)
	var p Presentation
	if err := p.Unmarshal(good); err != nil {
		t.Fatal(err)
	}
	d, err := VerifyPresentation(stmt, &p, trusted)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Data()) != "epoch 0epoch 1" || !d.Complete || !d.CloseNotify {
		t.Fatalf("%q %v %v", d.Data(), d.Complete, d.CloseNotify)
	}
	// Unmarshal refuses trailing bytes, unknown fields and oversize input.
	if err := p.Unmarshal(append(append([]byte(nil), good...), 0)); !errors.Is(err, ErrPresentation) {
		t.Fatal(err)
	}
	if err := p.Unmarshal(make([]byte, MaxPresentationSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatal(err)
	}
}

// FuzzVerifyHandshake feeds recorded client and server streams, a
// disclosed secret, a root certificate and a session time to
// VerifyHandshake, the notary's parser of untrusted handshake bytes. The
// committed seeds are real sessions (TLS 1.3, HelloRetryRequest, TLS 1.2)
// with the root and time they verify under.
func FuzzVerifyHandshake(f *testing.F) {
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0}, []byte{22, 3, 3, 0, 4, 2, 0, 0, 0}, []byte{}, []byte{}, int64(1))
	f.Fuzz(func(t *testing.T, client, server, secret, caDER []byte, now int64) {
		var recs []Record
		for _, s := range []struct {
			dir  Direction
			data []byte
		}{{ClientToServer, client}, {ServerToClient, server}} {
			rr := NewRecordReader(bytes.NewReader(s.data), s.dir)
			for {
				r, err := rr.Next()
				if err != nil {
					break
				}
				recs = append(recs, r)
			}
		}
		roots := x509.NewCertPool()
		if ca, err := x509.ParseCertificate(caDER); err == nil {
			roots.AddCert(ca)
		}
		hs, err := VerifyHandshake(recs, Disclosure{ServerHandshakeTrafficSecret: secret}, HandshakeOptions{Roots: roots, Now: time.Unix(now, 0)})
		if err != nil {
			if !typed(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if hs.SNI == "" || len(hs.Certificates) == 0 || hs.CertChainDigest != CertChainDigest(hs.Certificates) {
			t.Fatalf("incomplete result %+v", hs)
		}
	})
}

// FuzzParseKeyExchange: ParseKeyExchange, which both parties of an
// MPC-mode session run on the records they see, returns a typed error or
// a key exchange with both shares (or a retry), never panics.
func FuzzParseKeyExchange(f *testing.F) {
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0}, []byte{22, 3, 3, 0, 4, 2, 0, 0, 0})
	for _, c := range goCases() {
		cap := c.capture(f, []byte("x"))
		var cli, srv []byte
		for _, r := range cap.records {
			if r.Dir == ClientToServer {
				cli = append(cli, r.Raw...)
			} else {
				srv = append(srv, r.Raw...)
			}
		}
		f.Add(cli, srv)
	}
	f.Fuzz(func(t *testing.T, client, server []byte) {
		var recs []Record
		for _, s := range []struct {
			dir  Direction
			data []byte
		}{{ClientToServer, client}, {ServerToClient, server}} {
			rr := NewRecordReader(bytes.NewReader(s.data), s.dir)
			for {
				r, err := rr.Next()
				if err != nil {
					break
				}
				recs = append(recs, r)
			}
		}
		kx, err := ParseKeyExchange(recs)
		if err != nil {
			if !typed(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !kx.HelloRetry && (len(kx.ServerShare) == 0 || kx.Version == VersionTLS13 && len(kx.ClientShare) == 0) {
			t.Fatalf("incomplete key exchange %+v", kx)
		}
	})
}

// FuzzVerifyCheckpoint: a checkpoint a prover receives verifies only as
// signed, and anything else is a typed error.
func FuzzVerifyCheckpoint(f *testing.F) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	good, err := (&Checkpoint{SessionID: [16]byte{1}, Epoch: 2, ClientRecords: 5, ServerRecords: 9, Root: [32]byte{3}}).Sign(key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := VerifyCheckpoint(b, trusted)
		if err != nil {
			if !typed(err) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !bytes.Equal(b, good) {
			t.Fatalf("a checkpoint other than the signed one verifies: %+v", c)
		}
	})
}
