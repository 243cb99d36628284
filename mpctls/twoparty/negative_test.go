package twoparty

import (
	"bufio"
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls"
)

func tls13Server(t testing.TB) (string, *keyLog) {
	return startServer(t, &tls.Config{Certificates: []tls.Certificate{getPKI(t).ecdsa}, MinVersion: tls.VersionTLS13})
}

// handshakeCtx is the context of a test's handshake.
func handshakeCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestUnsupportedServers: a server MPC mode cannot serve fails the
// handshake with ErrUnsupported, after nothing but the ClientHello.
func TestUnsupportedServers(t *testing.T) {
	cases := []struct {
		name string
		cfg  *tls.Config
	}{
		// Asks for X25519 with a HelloRetryRequest.
		{"x25519-only", &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: []tls.CurveID{tls.X25519}}},
		// Accepts no suite MPC mode offers: handshake_failure.
		{"tls12-aes256-only", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}},
		{"tls12-chacha20-only", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}},
		{"p384-only", &tls.Config{MaxVersion: tls.VersionTLS12, CurvePreferences: []tls.CurveID{tls.CurveP384}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Certificates = []tls.Certificate{getPKI(t).ecdsa}
			addr, _ := startServer(t, tc.cfg)
			s := startSession(t, addr, Config{})
			err := s.conn.Handshake(handshakeCtx(t))
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("handshake: %v, want ErrUnsupported", err)
			}
			if n := len(s.relay.clientRecords()); n != 1 {
				t.Fatalf("the client sent %d records, want only its hello", n)
			}
		})
	}
}

// TestNotaryAnswersWrongly: a notary whose openings are wrong — the
// server handshake secret, an epoch's key — makes the client fail, with
// the typed error of what it could not check, before it reads anything.
func TestNotaryAnswersWrongly(t *testing.T) {
	flip := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		b[0] ^= 1
		return b
	}
	t.Run("handshake-secret", func(t *testing.T) {
		addr, _ := tls13Server(t)
		s := startSession(t, addr, Config{})
		s.hub.onOpen = func(to audience, data []byte) []byte {
			if to == toBoth && len(data) == 64 { // SHTS ‖ derived's inner midstate
				return flip(data)
			}
			return data
		}
		if err := s.conn.Handshake(handshakeCtx(t)); !errors.Is(err, mpctls.ErrDecrypt) {
			t.Fatalf("handshake with a wrong SHTS: %v, want ErrDecrypt", err)
		}
	})
	t.Run("epoch-key", func(t *testing.T) {
		addr, _ := tls13Server(t)
		s := startSession(t, addr, Config{})
		s.hub.onOpen = func(to audience, data []byte) []byte {
			if to == toProver && len(data) == 16+12 { // an epoch's key ‖ iv
				return flip(data)
			}
			return data
		}
		if err := s.conn.Handshake(handshakeCtx(t)); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(s.conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", testHost)
		if _, err := s.conn.Read(make([]byte, 100)); !errors.Is(err, mpctls.ErrDecrypt) {
			t.Fatalf("read with a wrong epoch key: %v, want ErrDecrypt", err)
		}
	})
}

// checkpointRelay is a relay whose checkpoints lie: they say fewer server
// records than were committed, or are signed by another key.
type checkpointRelay struct {
	*testRelay
	short bool
	key   ed25519.PrivateKey
}

func (r *checkpointRelay) Commit(epoch uint32, cut bool) ([]byte, uint64, error) {
	_, server, _ := r.testRelay.Commit(epoch, cut)
	cp := &mpctls.Checkpoint{SessionID: r.sid, Epoch: epoch, ServerRecords: server}
	if r.short {
		cp.ServerRecords = 1
	}
	key := r.testRelay.key
	if r.key != nil {
		key = r.key
	}
	b, err := cp.Sign(key)
	return b, server, err
}

// TestCheckpointChecks: the client refuses a checkpoint that does not
// cover the record it asked the reveal after, or that a trusted notary key
// did not sign, and reads nothing.
func TestCheckpointChecks(t *testing.T) {
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		name  string
		relay func(*testRelay) Relay
		want  error
	}{
		{"short", func(r *testRelay) Relay { return &checkpointRelay{testRelay: r, short: true} }, ErrProtocol},
		{"untrusted", func(r *testRelay) Relay { return &checkpointRelay{testRelay: r, key: other} }, mpctls.ErrSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := tls13Server(t)
			s := startSessionWith(t, addr, Config{}, tc.relay)
			if err := s.conn.Handshake(handshakeCtx(t)); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(s.conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", testHost)
			if _, err := s.conn.Read(make([]byte, 100)); !errors.Is(err, tc.want) {
				t.Fatalf("read: %v, want %v", err, tc.want)
			}
		})
	}
}

// otherShare is a prover engine whose client key share is not the two
// parties' one: a prover that wants to know the ECDHE secret alone.
type otherShare struct{ *idealSide }

func (o otherShare) KeyShare(ctx context.Context) ([]byte, error) {
	if _, err := o.idealSide.KeyShare(ctx); err != nil {
		return nil, err
	}
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return k.PublicKey().Bytes(), nil
}

// TestProverDeviates: the notary refuses a prover that sends a key share
// of its own, or asks for a reveal before the handshake is checked.
func TestProverDeviates(t *testing.T) {
	t.Run("own-key-share", func(t *testing.T) {
		addr, _ := tls13Server(t)
		s := startSession(t, addr, Config{})
		s.conn.e = otherShare{s.conn.e.(*idealSide)}
		if err := s.conn.Handshake(handshakeCtx(t)); !errors.Is(err, ErrRefused) {
			t.Fatalf("handshake with a key share of the prover's own: %v, want ErrRefused", err)
		}
		if o := <-s.outcome; !errors.Is(o.err, ErrProtocol) {
			t.Fatalf("notary side: %v, want ErrProtocol", o.err)
		}
	})
	t.Run("reveal-out-of-turn", func(t *testing.T) {
		addr, _ := tls13Server(t)
		s := startSession(t, addr, Config{})
		ctx := handshakeCtx(t)
		if _, err := s.conn.e.KeyShare(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.conn.ask(ctx, request{kind: reqReveal, end: true}); !errors.Is(err, ErrRefused) {
			t.Fatalf("reveal before the handshake: %v, want ErrRefused", err)
		}
		if o := <-s.outcome; !errors.Is(o.err, ErrProtocol) {
			t.Fatalf("notary side: %v, want ErrProtocol", o.err)
		}
	})
}

// TestInjectedRecord: a record injected on the notary–server path,
// protected with an epoch key after it was revealed (an attacker the
// prover handed it to), is caught twice: the client cannot open it under
// the next epoch's key, and a presentation that places it in the revealed
// epoch breaks the reveal rule.
func TestInjectedRecord(t *testing.T) {
	addr, _ := tls13Server(t)
	var s *session
	injected := false
	s = startSessionWith(t, addr, Config{}, func(r *testRelay) Relay {
		r.inject = func(after mpctls.Record) []byte {
			keys := s.hub.openedTo(toProver)
			// Opened to the prover so far: CHTS, CATS, then epoch keys.
			if injected || len(keys) < 3 {
				return nil
			}
			injected = true
			kiv := keys[2]
			suite, _ := mpctls.SuiteByID(0x1301)
			seal, err := mpctls.NewSealer13Keys(suite, kiv[:16], kiv[16:])
			if err != nil {
				panic(err)
			}
			// Sealed for its place in epoch 0, as a presentation would
			// claim it.
			seq := after.Seq + 1 - s.conn.ConnectionState().Handshake.ServerProtectedFrom
			raw, _ := seal.Seal(nil, seq, mpctls.RecordApplicationData, []byte("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"))
			return raw
		}
		return r
	})
	if err := s.conn.Handshake(handshakeCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s.conn, "/one"); got != "path /one;" {
		t.Fatalf("first response %q", got)
	}
	fmt.Fprintf(s.conn, "GET /two HTTP/1.1\r\nHost: %s\r\n\r\n", testHost)
	br := bufio.NewReader(s.conn)
	resp, err := http.ReadResponse(br, nil)
	if err == nil {
		// The response came whole before the injected record: the next
		// read meets it.
		if _, err = io.ReadAll(resp.Body); err == nil {
			_, err = br.ReadByte()
		}
	}
	if !injected {
		t.Fatal("nothing was injected")
	}
	if !errors.Is(err, mpctls.ErrDecrypt) {
		t.Fatalf("reading past the injected record: %v, want ErrDecrypt", err)
	}
	s.conn.Close()
	sec, err := s.conn.Finish(handshakeCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	o := <-s.outcome
	if o.err != nil {
		t.Fatal(o.err)
	}
	// The notary signs what it recorded, the injected record included; a
	// presentation claiming it for epoch 0 fails the reveal rule.
	stmt, trusted := s.relay.sign(t, o.o)
	recs := s.relay.all()
	forged := s.relay.injectedSeq
	if forged < o.o.Reveals[0] {
		t.Fatalf("injected record %d precedes the first reveal at %d", forged, o.o.Reveals[0])
	}
	p, err := mpctls.BuildPresentation(recs, stmt, sec.ServerSecret, []uint64{o.o.Handshake.ServerProtectedFrom}, []uint64{forged})
	if err == nil {
		_, err = mpctls.VerifyPresentation(stmt, p, trusted)
	}
	if !errors.Is(err, mpctls.ErrPresentation) {
		t.Fatalf("presentation of the injected record: %v, want ErrPresentation", err)
	}
}

// TestEpochEndsElsewhere: a record the client was told ends its epoch,
// but that is application data, stops the reads with ErrEpoch.
func TestEpochEndsElsewhere(t *testing.T) {
	suite, _ := mpctls.SuiteByID(0x1301)
	key, iv := make([]byte, 16), make([]byte, 12)
	seal, _ := mpctls.NewSealer13Keys(suite, key, iv)
	op, _ := mpctls.NewOpener13Keys(suite, key, iv)
	c := &Conn{state: State{Version: mpctls.VersionTLS13}, opener: op, epochs: []uint64{0}, endsAt: 0, changed: make(chan struct{})}
	raw, _ := seal.Seal(nil, 0, mpctls.RecordApplicationData, []byte("0\r\n\r\n"))
	rec := mpctls.Record{Dir: mpctls.ServerToClient, Type: raw[0], Version: 0x0303, Raw: raw}
	c.srv = []mpctls.Record{rec}
	if err := c.consume(&c.srv[0]); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(c.rerr, ErrEpoch) {
		t.Fatalf("after a data record at the epoch's end: %v, want ErrEpoch", c.rerr)
	}
}

var _ net.Conn = (*Conn)(nil)

// swapNotary is a notary engine that feeds the inner hash of
// derived(HS) where SHTS's belongs, to have derived(HS) — and with it the
// master secret and the client's keys — opened to it.
type swapNotary struct {
	*idealSide
	hsInner [32]byte
	opens   int
	assigns int
}

func (s *swapNotary) Open(ctx context.Context, v value, to audience) ([]byte, error) {
	b, err := s.idealSide.Open(ctx, v, to)
	if s.opens == 0 && err == nil {
		copy(s.hsInner[:], b)
	}
	s.opens++
	return b, err
}

func (s *swapNotary) Assign(ctx context.Context, v value, data []byte) error {
	if data != nil {
		s.assigns++
		if s.assigns == 2 {
			empty := sha256.Sum256(nil)
			data, _ = expandInner(s.hsInner, "derived", empty[:], 32)
		}
	}
	return s.idealSide.Assign(ctx, v, data)
}

// TestNotarySteersInput: a notary whose inner hash selects another
// derivation of the handshake secret for an output opened to it is
// caught by the prover's copy of that input: the prover stops before
// anything more is opened to the notary.
func TestNotarySteersInput(t *testing.T) {
	addr, _ := tls13Server(t)
	relay := startRelay(t, addr)
	pe, ne, hub := idealPair()
	tunnel, err := net.Dial("tcp", relay.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := handshakeCtx(t)
	n := newNotary(&swapNotary{idealSide: ne}, ne.messages(), relay, NotaryConfig{Roots: getPKI(t).roots})
	go n.Serve(ctx)
	c := newConn(tunnel, pe, pe.messages(), Config{ServerName: testHost, RootCAs: getPKI(t).roots, SessionID: relay.sid, NotaryKeys: []ed25519.PublicKey{relay.pub}})
	if err := c.Handshake(ctx); !errors.Is(err, ErrProtocol) {
		t.Fatalf("handshake with a steered input: %v, want ErrProtocol", err)
	}
	if both := hub.openedTo(toBoth); len(both) != 1 {
		t.Fatalf("%d values opened to both; only the handshake secret's inner midstate may be", len(both))
	}
}
