package attestation_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/sha512"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
)

// testBackend is a stand-in TEE: its "evidence" is the report data itself.
// The verify package tests real evidence; this package tests formats.
type testBackend struct{ last [64]byte }

func (b *testBackend) Profile() string { return attestation.ProfileSEVSNPSim }
func (b *testBackend) Measurement() []byte {
	m := sha512.Sum384([]byte("build"))
	return m[:]
}
func (b *testBackend) Quote(_ context.Context, rd [64]byte) ([]byte, error) {
	b.last = rd
	return append([]byte("evidence:"), rd[:]...), nil
}
func (b *testBackend) SealingKey(context.Context) ([]byte, error) {
	return bytes.Repeat([]byte{7}, 32), nil
}

var issued = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newEnclave(t testing.TB, tls bool) (*attestation.Enclave, *testBackend) {
	t.Helper()
	b := &testBackend{}
	e, err := attestation.New(context.Background(), b, attestation.Options{TLS: tls, Now: func() time.Time { return issued }})
	if err != nil {
		t.Fatal(err)
	}
	return e, b
}

func rawClaims() attestation.Claims {
	return attestation.Claims{
		RequestID: "req-1", OutputFormat: "fhir_r4", OutputDigest: attestation.Digest([]byte("out")),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("in"))},
	}
}

func TestBootBindsKeysAndNonce(t *testing.T) {
	for _, tls := range []bool{false, true} {
		e, b := newEnclave(t, tls)
		boot := e.BootEvidence()
		if boot.ReportData() != b.last {
			t.Fatal("the quote's report data is not BootReportData of the boot keys and nonce")
		}
		if tls != (len(boot.TLSKey) > 0) || tls != (e.TLSSigner() != nil) {
			t.Fatalf("tls=%v: TLS key %d bytes", tls, len(boot.TLSKey))
		}
		if tls {
			pub, err := boot.TLSPublicKey()
			if err != nil || !pub.Equal(e.TLSSigner().Public()) {
				t.Fatalf("TLS key in the evidence is not the signer's: %v", err)
			}
			if _, ok := e.TLSSigner().(*ecdsa.PrivateKey); ok {
				t.Fatal("TLSSigner exposes the private key")
			}
		}
		parsed, err := attestation.ParseBootEvidence(e.MarshalBootEvidence())
		if err != nil || parsed.ReportData() != b.last {
			t.Fatalf("boot evidence round trip: %v", err)
		}
	}
}

func TestBootReportDataEncoding(t *testing.T) {
	// Length prefixes keep the encoding injective: moving a byte from one
	// part to the next changes the digest.
	a := attestation.BootReportData([]byte("ab"), []byte("c"), []byte("n"))
	b := attestation.BootReportData([]byte("a"), []byte("bc"), []byte("n"))
	if a == b {
		t.Fatal("BootReportData is not injective")
	}
	// Pinned vector: SHA-512("acds/v1/boot" 00 | 00000001 'S' | 00000000 | 00000002 'N' 'N').
	h := sha512.New()
	h.Write([]byte("acds/v1/boot\x00\x00\x00\x00\x01S\x00\x00\x00\x00\x00\x00\x00\x02NN"))
	var want [64]byte
	copy(want[:], h.Sum(nil))
	if got := attestation.BootReportData([]byte("S"), nil, []byte("NN")); got != want {
		t.Fatal("BootReportData does not match its documented encoding")
	}
}

func TestAttestRoundTrip(t *testing.T) {
	e, _ := newEnclave(t, false)
	stmts := [][]byte{[]byte("notary statement 1"), []byte("notary statement 2")}
	c := attestation.Claims{
		RequestID: "req-2", OutputFormat: "fhir_r4", OutputDigest: attestation.Digest([]byte("o")),
		Source: attestation.Source{Kind: acds.SourceMPCTLS, Sessions: []attestation.Session{
			{RequestLine: "GET /a HTTP/1.1", Host: "portal.example.org"},
			{RequestLine: "GET /b HTTP/1.1", Host: "portal.example.org"},
		}},
	}
	raw, err := e.Attest(context.Background(), c, stmts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := attestation.ParseBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Marshal()
	if err != nil || !bytes.Equal(again, raw) {
		t.Fatal("bundle does not re-encode identically")
	}
	pub, err := b.Boot.SigningPublicKey()
	if err != nil {
		t.Fatal(err)
	}
	got, err := attestation.VerifyClaims(b.Statement, pub)
	if err != nil {
		t.Fatal(err)
	}
	if !got.IssuedAt.Equal(issued) || !bytes.Equal(got.Measurement, e.Measurement()) || got.Source.Sessions[1].StatementDigest != attestation.Digest(stmts[1]) {
		t.Fatalf("claims: %+v", got)
	}
	// Another key does not verify the statement.
	other, _ := newEnclave(t, false)
	otherPub, _ := other.BootEvidence().SigningPublicKey()
	if _, err := attestation.VerifyClaims(b.Statement, otherPub); !errors.Is(err, attestation.ErrSignature) {
		t.Fatalf("foreign key: %v", err)
	}
	// Mismatched sessions and statements are refused at signing time.
	if _, err := e.Attest(context.Background(), c, stmts[:1]); !errors.Is(err, attestation.ErrMalformed) {
		t.Fatalf("1 statement for 2 sessions: %v", err)
	}
	c.Source.Sessions[0].StatementDigest = attestation.Digest([]byte("something else"))
	if _, err := e.Attest(context.Background(), c, stmts); !errors.Is(err, attestation.ErrMalformed) {
		t.Fatalf("wrong statement digest: %v", err)
	}
}

func TestClaimsChecks(t *testing.T) {
	e, _ := newEnclave(t, false)
	bad := map[string]func(*attestation.Claims){
		"no request id":     func(c *attestation.Claims) { c.RequestID = "" },
		"bad digest":        func(c *attestation.Claims) { c.OutputDigest = "sha256:XYZ" },
		"upper-case digest": func(c *attestation.Claims) { c.OutputDigest = strings.ToUpper(c.OutputDigest) },
		"unknown source":    func(c *attestation.Claims) { c.Source.Kind = "carrier-pigeon" },
		"raw with sessions": func(c *attestation.Claims) {
			c.Source.Sessions = []attestation.Session{{Host: "h", RequestLine: "GET / HTTP/1.1"}}
		},
		"short notary key":  func(c *attestation.Claims) { c.NotaryKey = []byte{1, 2, 3} },
		"other measurement": func(c *attestation.Claims) { c.Measurement = make([]byte, 48) },
	}
	for name, edit := range bad {
		c := rawClaims()
		edit(&c)
		var stmts [][]byte
		if len(c.Source.Sessions) > 0 {
			stmts = [][]byte{[]byte("s")}
		}
		if _, err := e.Attest(context.Background(), c, stmts); !errors.Is(err, attestation.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseBundleStrict(t *testing.T) {
	e, _ := newEnclave(t, true)
	raw, err := e.Attest(context.Background(), rawClaims(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 1024 {
		t.Errorf("bundle with stand-in evidence is %d bytes", len(raw))
	}
	cases := map[string][]byte{
		"empty":          nil,
		"truncated":      raw[:len(raw)-1],
		"trailing":       append(bytes.Clone(raw), 0xf6),
		"indefinite map": append([]byte{0xbf}, append(bytes.Clone(raw[1:]), 0xff)...),
		"not a map":      {0x83, 0x01, 0x02, 0x03},
	}
	// A non-canonical length encoding of the version (1 as 0x18 0x01).
	if raw[1] == 0x01 && raw[2] == 0x01 {
		nc := append([]byte{raw[0], 0x01, 0x18, 0x01}, raw[3:]...)
		cases["non-canonical integer"] = nc
	}
	for name, in := range cases {
		if _, err := attestation.ParseBundle(in); !errors.Is(err, attestation.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := attestation.ParseBundle(make([]byte, attestation.MaxBundleSize+1)); !errors.Is(err, attestation.ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
}

func TestSealOpen(t *testing.T) {
	e, _ := newEnclave(t, false)
	s1, _ := e.Seal([]byte("secret"), []byte("ad"))
	s2, _ := e.Seal([]byte("secret"), []byte("ad"))
	if bytes.Equal(s1, s2) {
		t.Fatal("sealing is deterministic: nonces repeat")
	}
	for _, in := range [][]byte{nil, s1[:5], append([]byte{9}, s1[1:]...)} {
		if _, err := e.Open(in, []byte("ad")); !errors.Is(err, attestation.ErrSealed) {
			t.Errorf("Open(%x): %v", in, err)
		}
	}
}

// FuzzParseBundle: arbitrary bytes never panic, and whatever parses
// re-encodes to exactly the same bytes (one encoding per bundle).
func FuzzParseBundle(f *testing.F) {
	e, _ := newEnclave(f, true)
	raw, err := e.Attest(context.Background(), rawClaims(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(e.MarshalBootEvidence())
	f.Fuzz(func(t *testing.T, data []byte) {
		if b, err := attestation.ParseBundle(data); err == nil {
			again, err := b.Marshal()
			if err != nil || !bytes.Equal(again, data) {
				t.Fatalf("parsed bundle re-encodes differently: %v", err)
			}
		}
		if b, err := attestation.ParseBootEvidence(data); err == nil {
			again, err := b.Marshal()
			if err != nil || !bytes.Equal(again, data) {
				t.Fatalf("parsed boot evidence re-encodes differently: %v", err)
			}
		}
	})
}

// FuzzVerifyClaims: arbitrary statements never panic and never verify
// under the enclave's key unless they are the signed original.
func FuzzVerifyClaims(f *testing.F) {
	e, _ := newEnclave(f, false)
	raw, err := e.Attest(context.Background(), rawClaims(), nil)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := attestation.ParseBundle(raw)
	pub, _ := b.Boot.SigningPublicKey()
	f.Add(b.Statement)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := attestation.VerifyClaims(data, pub); err == nil && !bytes.Equal(data, b.Statement) {
			t.Fatalf("a modified statement verified: %x", data)
		}
		attestation.ParseClaims(data)
	})
}

func TestTLSCertificate(t *testing.T) {
	e, _ := newEnclave(t, false)
	if _, err := e.TLSCertificate(0); !errors.Is(err, attestation.ErrNoTLSKey) {
		t.Fatalf("enclave without TLS key: %v", err)
	}
	e, _ = newEnclave(t, true)
	cert, err := e.TLSCertificate(time.Hour, "enclave.example.org", "192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(attestation.BootEvidenceFromCertificate(cert.Leaf), e.MarshalBootEvidence()) {
		t.Fatal("certificate does not carry the boot evidence")
	}
	if !cert.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(e.TLSSigner().Public()) {
		t.Fatal("certificate key is not the enclave TLS key")
	}
	if err := cert.Leaf.VerifyHostname("enclave.example.org"); err != nil {
		t.Fatal(err)
	}
	if !cert.Leaf.NotAfter.Equal(issued.Add(time.Hour)) {
		t.Fatalf("validity ends %s", cert.Leaf.NotAfter)
	}
}

// keyBackend is testBackend with a sealing key of its own, or none.
type keyBackend struct {
	testBackend
	key []byte
	err error
}

func (b *keyBackend) SealingKey(context.Context) ([]byte, error) { return bytes.Clone(b.key), b.err }

func TestSealedByOtherKey(t *testing.T) {
	ctx := context.Background()
	a, err := attestation.New(ctx, &keyBackend{key: bytes.Repeat([]byte{1}, 32)}, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := attestation.New(ctx, &keyBackend{key: bytes.Repeat([]byte{2}, 32)}, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := a.Seal([]byte("secret"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(attestation.SealedKeyID(sealed), a.SealingKeyID()) || bytes.Equal(a.SealingKeyID(), b.SealingKeyID()) {
		t.Fatal("sealed data must name the sealing key, and two keys must have two ids")
	}
	if _, err := b.Open(sealed, []byte("ad")); !errors.Is(err, attestation.ErrSealedByOtherKey) || !errors.Is(err, attestation.ErrSealed) {
		t.Fatalf("another key: %v", err)
	}
	// Tampering with the authenticated head is not mistaken for another key.
	bad := bytes.Clone(sealed)
	bad[len(bad)-1] ^= 1
	if _, err := a.Open(bad, []byte("ad")); !errors.Is(err, attestation.ErrSealed) || errors.Is(err, attestation.ErrSealedByOtherKey) {
		t.Fatalf("tampered: %v", err)
	}
	if pt, err := a.Open(sealed, []byte("ad")); err != nil || string(pt) != "secret" {
		t.Fatalf("own key: %q %v", pt, err)
	}
}

// Data sealed in the first format (no key id), as data directories made
// before the key id hold, still opens.
func TestOpenFirstSealFormat(t *testing.T) {
	e, _ := newEnclave(t, false)
	block, _ := aes.NewCipher(bytes.Repeat([]byte{7}, 32))
	gcm, _ := cipher.NewGCM(block)
	nonce := bytes.Repeat([]byte{3}, gcm.NonceSize())
	v1 := gcm.Seal(append([]byte{1}, nonce...), nonce, []byte("old secret"), []byte("ad"))
	if pt, err := e.Open(v1, []byte("ad")); err != nil || string(pt) != "old secret" {
		t.Fatalf("first format: %q %v", pt, err)
	}
	if attestation.SealedKeyID(v1) != nil {
		t.Fatal("the first format carries no key id")
	}
	if _, err := e.Open(v1, []byte("other ad")); !errors.Is(err, attestation.ErrSealed) {
		t.Fatalf("first format, other ad: %v", err)
	}
}

// A backend without a sealing key (TDX) gets one per boot: sealing works
// within the boot, and the next boot cannot open it.
func TestNoSealingKeyIsPerBoot(t *testing.T) {
	ctx := context.Background()
	back := &keyBackend{err: fmt.Errorf("tdx: %w", attestation.ErrNoSealingKey)}
	boot1, err := attestation.New(ctx, back, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if boot1.PersistentSealing() {
		t.Fatal("a per-boot key reported as persistent")
	}
	sealed, err := boot1.Seal([]byte("credentials"), []byte("req"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := boot1.Open(sealed, []byte("req")); err != nil || string(pt) != "credentials" {
		t.Fatalf("same boot: %q %v", pt, err)
	}
	boot2, err := attestation.New(ctx, back, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := boot2.Open(sealed, []byte("req")); !errors.Is(err, attestation.ErrSealedByOtherKey) {
		t.Fatalf("next boot: %v", err)
	}
	// Any other SealingKey failure is a start-up error.
	if _, err := attestation.New(ctx, &keyBackend{err: errors.New("device busy")}, attestation.Options{}); err == nil {
		t.Fatal("a failing sealing key was ignored")
	}
	e, _ := newEnclave(t, false)
	if !e.PersistentSealing() {
		t.Fatal("a backend's sealing key reported as per boot")
	}
}
