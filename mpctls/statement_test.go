package mpctls

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/veraison/go-cose"
)

func testKey(t testing.TB, seed byte) ed25519.PrivateKey {
	t.Helper()
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32))
}

func testStatement() *Statement {
	start := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC)
	return &Statement{
		SessionID:       [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		Start:           start,
		End:             start.Add(1500 * time.Millisecond),
		SNI:             "portal.example.org",
		Address:         "[2001:db8::1]:443",
		Version:         VersionTLS13,
		CipherSuite:     0x1301,
		CertChainDigest: sha256.Sum256([]byte("chain")),
		CertSubject:     "CN=portal.example.org,O=Example Health",
		Root:            sha256.Sum256([]byte("root")),
		ClientRecords:   12, ClientBytes: 4000,
		ServerRecords: 700, ServerBytes: 10_500_000,
	}
}

func TestStatementRoundTrip(t *testing.T) {
	key := testKey(t, 1)
	s := testStatement()
	b, err := s.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1024 {
		t.Fatalf("statement is %d bytes, target is 1 KiB", len(b))
	}
	t.Logf("statement size: %d bytes", len(b))
	pub := key.Public().(ed25519.PublicKey)
	got, err := VerifyStatement(b, []ed25519.PublicKey{testKey(t, 2).Public().(ed25519.PublicKey), pub}, Expect{
		SNI: "Portal.Example.org", NotBefore: s.Start.Add(-time.Second), NotAfter: s.End.Add(time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Start.Equal(s.Start) || !got.End.Equal(s.End) || got.SNI != s.SNI || got.Address != s.Address ||
		got.Root != s.Root || got.CertChainDigest != s.CertChainDigest || got.ServerBytes != s.ServerBytes ||
		got.NotaryKeyID != KeyID(pub) || got.SessionID != s.SessionID || got.CipherSuite != s.CipherSuite ||
		got.CertSubject != s.CertSubject {
		t.Fatalf("round trip changed the statement:\n%+v\n%+v", got, s)
	}
	if got.Digest() != sha256.Sum256(b) || !bytes.Equal(got.Raw(), b) {
		t.Fatal("digest")
	}
	// Deterministic: signing again gives identical bytes (Ed25519 is
	// deterministic, the CBOR is canonical).
	b2, err := s.Sign(key)
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatal("signing is not deterministic")
	}
}

func TestVerifyStatementRejects(t *testing.T) {
	key := testKey(t, 1)
	pub := key.Public().(ed25519.PublicKey)
	s := testStatement()
	b, err := s.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	trusted := []ed25519.PublicKey{pub}

	if _, err := VerifyStatement(b, nil, Expect{}); !errors.Is(err, ErrSignature) {
		t.Errorf("no trusted keys: %v", err)
	}
	if _, err := VerifyStatement(b, []ed25519.PublicKey{testKey(t, 2).Public().(ed25519.PublicKey)}, Expect{}); !errors.Is(err, ErrSignature) {
		t.Errorf("untrusted key: %v", err)
	}
	// A statement signed by an untrusted key that claims the trusted key id.
	forged := *s
	other := testKey(t, 3)
	fb, err := forged.Sign(other)
	if err != nil {
		t.Fatal(err)
	}
	msg := cose.NewSign1Message()
	if err := msg.UnmarshalCBOR(fb); err != nil {
		t.Fatal(err)
	}
	forged.NotaryKeyID = KeyID(pub)
	msg.Payload, _ = stmtCodec.enc.Marshal(forged.wire())
	fb, _ = msg.MarshalCBOR()
	if _, err := VerifyStatement(fb, trusted, Expect{}); !errors.Is(err, ErrSignature) {
		t.Errorf("forged key id: %v", err)
	}
	// Flip every byte of the signed statement in turn: nothing may verify.
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x01
		if _, err := VerifyStatement(c, trusted, Expect{}); err == nil {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
	var ee *ExpectationError
	if _, err := VerifyStatement(b, trusted, Expect{SNI: "other.example.org"}); !errors.As(err, &ee) || ee.Field != "sni" || !errors.Is(err, ErrExpectation) {
		t.Errorf("wrong sni: %v", err)
	}
	if _, err := VerifyStatement(b, trusted, Expect{NotBefore: s.Start.Add(time.Millisecond)}); !errors.As(err, &ee) || ee.Field != "not-before" {
		t.Errorf("not before: %v", err)
	}
	if _, err := VerifyStatement(b, trusted, Expect{NotAfter: s.End.Add(-time.Millisecond)}); !errors.As(err, &ee) || ee.Field != "not-after" {
		t.Errorf("not after: %v", err)
	}
	if _, err := ParseStatement(make([]byte, MaxStatementSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("size limit: %v", err)
	}
}

func TestStatementWellFormed(t *testing.T) {
	key := testKey(t, 1)
	mut := map[string]func(*Statement){
		"no session":      func(s *Statement) { s.SessionID = [16]byte{} },
		"ends early":      func(s *Statement) { s.End = s.Start.Add(-time.Second) },
		"no start":        func(s *Statement) { s.Start = time.Time{} },
		"empty sni":       func(s *Statement) { s.SNI = "" },
		"bad sni":         func(s *Statement) { s.SNI = "a b.example" },
		"bad address":     func(s *Statement) { s.Address = "portal.example.org:443" },
		"tls 1.1":         func(s *Statement) { s.Version = 0x0302 },
		"cbc suite":       func(s *Statement) { s.CipherSuite = 0xc013 },
		"suite/version":   func(s *Statement) { s.Version = VersionTLS12 },
		"no root":         func(s *Statement) { s.Root = [32]byte{} },
		"no records":      func(s *Statement) { s.ServerRecords = 0 },
		"too many bytes":  func(s *Statement) { s.ClientBytes = 1 << 40 },
		"long subject":    func(s *Statement) { s.CertSubject = strings.Repeat("x", MaxCertSubject+1) },
		"control char":    func(s *Statement) { s.CertSubject = "CN=a\nb" },
		"not utf-8":       func(s *Statement) { s.CertSubject = "CN=\xff" },
		"unknown mode":    func(s *Statement) { s.Mode = 2 },
		"proxy reveals":   func(s *Statement) { s.Reveals = []uint64{3} },
		"reveals down":    func(s *Statement) { s.Mode, s.Reveals = ModeMPC, []uint64{5, 4} },
		"reveal past end": func(s *Statement) { s.Mode, s.Reveals = ModeMPC, []uint64{701} },
		"tls 1.2 epochs": func(s *Statement) {
			s.Version, s.CipherSuite, s.Mode, s.Reveals = VersionTLS12, 0xc02b, ModeMPC, []uint64{3, 4}
		},
	}
	for name, m := range mut {
		s := testStatement()
		m(s)
		if _, err := s.Sign(key); !errors.Is(err, ErrStatement) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	// A payload with an unknown field, or not canonically encoded, is refused.
	s := testStatement()
	if _, err := s.Sign(key); err != nil {
		t.Fatal(err)
	}
	type extended struct {
		wireStatement
		X int `cbor:"99,keyasint"`
	}
	payload, _ := stmtCodec.enc.Marshal(extended{*s.wire(), 1})
	signer, _ := cose.NewSigner(cose.AlgorithmEdDSA, key)
	msg := cose.NewSign1Message()
	msg.Headers.Protected.SetAlgorithm(cose.AlgorithmEdDSA)
	msg.Headers.Protected[cose.HeaderLabelContentType] = StatementContentType
	msg.Payload = payload
	if err := msg.Sign(nil, nil, signer); err != nil {
		t.Fatal(err)
	}
	b, _ := msg.MarshalCBOR()
	if _, err := ParseStatement(b); !errors.Is(err, ErrStatement) {
		t.Errorf("unknown field: %v", err)
	}
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

func TestStatementSizeWorstCase(t *testing.T) {
	s := testStatement()
	label := strings.Repeat("a", 63)
	s.SNI = label + "." + label + "." + label + "." + strings.Repeat("b", 61) // 253 bytes
	s.Address = "[2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
	s.ClientRecords, s.ClientBytes = 1<<40, 1<<50
	s.ServerRecords, s.ServerBytes = 1<<40, 1<<50
	s.CertSubject = strings.Repeat("s", MaxCertSubject)
	b, err := s.Sign(testKey(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1024 {
		t.Fatalf("worst-case statement is %d bytes", len(b))
	}
	t.Logf("worst-case statement size: %d bytes", len(b))
	s.Mode = ModeMPC
	for i := 0; i < MaxReveals; i++ {
		s.Reveals = append(s.Reveals, 1<<40-uint64(MaxReveals-i))
	}
	if b, err = s.Sign(testKey(t, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseStatement(b); err != nil {
		t.Fatalf("worst-case mpc-mode statement of %d bytes: %v", len(b), err)
	}
	t.Logf("worst-case mpc-mode statement size: %d bytes", len(b))
	s.Reveals = append(s.Reveals, 1<<40)
	if _, err := s.Sign(testKey(t, 1)); !errors.Is(err, ErrStatement) {
		t.Fatalf("%d reveals: %v", len(s.Reveals), err)
	}
}

// TestStatementWithoutSubject: statements of notaries that did not record
// the certificate subject (key 16 absent) still parse, to "".
func TestStatementWithoutSubject(t *testing.T) {
	key := testKey(t, 1)
	s := testStatement()
	s.CertSubject = ""
	b, err := s.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseStatement(b)
	if err != nil || got.CertSubject != "" {
		t.Fatalf("%+v %v", got, err)
	}
	if bytes.Contains(b, []byte{0x10, 0x60}) { // key 16 with an empty string would not be canonical omission
		t.Error("an empty subject was encoded")
	}
}

func TestParseStatementHeaders(t *testing.T) {
	key := testKey(t, 1)
	s := testStatement()
	if _, err := s.Sign(key); err != nil {
		t.Fatal(err)
	}
	payload, _ := stmtCodec.enc.Marshal(s.wire())
	sign := func(alg cose.Algorithm, signer cose.Signer, mut func(*cose.Sign1Message)) []byte {
		msg := cose.NewSign1Message()
		msg.Headers.Protected.SetAlgorithm(alg)
		msg.Headers.Protected[cose.HeaderLabelContentType] = StatementContentType
		msg.Payload = payload
		if mut != nil {
			mut(msg)
		}
		if err := msg.Sign(rand.Reader, nil, signer); err != nil {
			t.Fatal(err)
		}
		b, err := msg.MarshalCBOR()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ed, _ := cose.NewSigner(cose.AlgorithmEdDSA, key)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	es, _ := cose.NewSigner(cose.AlgorithmES256, ecKey)
	cases := map[string][]byte{
		"es256":           sign(cose.AlgorithmES256, es, nil),
		"content type":    sign(cose.AlgorithmEdDSA, ed, func(m *cose.Sign1Message) { m.Headers.Protected[cose.HeaderLabelContentType] = "application/cbor" }),
		"extra protected": sign(cose.AlgorithmEdDSA, ed, func(m *cose.Sign1Message) { m.Headers.Protected[cose.HeaderLabelKeyID] = []byte{1} }),
		"unprotected":     sign(cose.AlgorithmEdDSA, ed, func(m *cose.Sign1Message) { m.Headers.Unprotected[cose.HeaderLabelKeyID] = []byte{1} }),
		"empty":           {},
		"not cbor":        []byte("statement"),
		"untagged":        sign(cose.AlgorithmEdDSA, ed, nil)[1:],
	}
	for name, b := range cases {
		if _, err := ParseStatement(b); !errors.Is(err, ErrStatement) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := ParseStatement(sign(cose.AlgorithmEdDSA, ed, nil)); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// TestStatementMode: an MPC-mode statement carries its mode and reveal
// points through signing and parsing, a proxy-mode one encodes without
// them (TestStatementGolden pins its bytes), and RequireMPC refuses the
// latter.
func TestStatementMode(t *testing.T) {
	key := testKey(t, 1)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	s := testStatement()
	s.Mode, s.Reveals = ModeMPC, []uint64{10, 10, 42}
	b, err := s.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyStatement(b, trusted, Expect{RequireMPC: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != ModeMPC || got.Mode.String() != "mpc" || fmt.Sprint(got.Reveals) != "[10 10 42]" {
		t.Fatalf("parsed mode %v, reveals %v", got.Mode, got.Reveals)
	}
	p := testStatement()
	pb, err := p.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(pb) >= len(b) {
		t.Fatal("a proxy-mode statement is not shorter than an mpc-mode one")
	}
	var ee *ExpectationError
	if _, err := VerifyStatement(pb, trusted, Expect{RequireMPC: true}); !errors.As(err, &ee) || ee.Field != "mode" || ee.Got != "proxy" {
		t.Fatalf("proxy statement under RequireMPC: %v", err)
	}
	if got, err := VerifyStatement(pb, trusted, Expect{}); err != nil || got.Mode != ModeProxy || got.Reveals != nil {
		t.Fatalf("proxy statement: %v, %+v", err, got)
	}
}
