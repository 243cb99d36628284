package mpctls

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/veraison/go-cose"
)

// StatementVersion is the version of the statement format this package
// produces and accepts.
const StatementVersion = 1

// MaxStatementSize bounds the encoded size of a statement accepted by
// ParseStatement and VerifyStatement. Real statements are about 400 bytes.
const MaxStatementSize = 4096

// StatementContentType is the COSE content type (protected header 3) of a
// signed statement. It separates statements from anything else a notary
// key might ever sign.
const StatementContentType = "application/acds-notary-statement+cbor"

var stmtCodec = newCodec(MaxReveals)

// Statement is what a notary attests about one TLS session it relayed: who
// was contacted, when, with which protocol parameters and server
// certificate chain, and a Merkle root committing to every record of both
// directions (see Transcript). It says nothing about the plaintext.
type Statement struct {
	SessionID       [16]byte  // random identifier chosen by the notary
	Start           time.Time // when the notary dialed the server (millisecond precision on the wire)
	End             time.Time // when the session closed
	SNI             string    // server name the prover asked for and the certificate was verified for
	Address         string    // the address the notary resolved and dialed, "ip:port"
	Version         uint16    // negotiated TLS version: 0x0303 or 0x0304
	CipherSuite     uint16    // negotiated AEAD cipher suite (IANA code point)
	CertChainDigest [32]byte  // see CertChainDigest
	// CertSubject is the subject of the server's leaf certificate as the
	// notary verified it (RFC 2253 string, at most MaxCertSubject bytes);
	// "" in statements of notaries that did not record it, which encode
	// exactly as before the field existed (key 16 is omitted). The chain
	// itself is not in the statement; CertChainDigest pins it. (A verifier
	// older than the field refuses key 16 as unknown; bundles carrying
	// such statements are bundle version 2, which it refuses anyway.)
	CertSubject   string
	Root          [32]byte // Merkle root over all records (see Transcript)
	ClientRecords uint64   // records client→server
	ClientBytes   uint64   // wire bytes client→server, headers included
	ServerRecords uint64   // records server→client
	ServerBytes   uint64   // wire bytes server→client, headers included
	NotaryKeyID   [32]byte // KeyID of the signing notary key; Sign sets it
	// Mode is how the session's keys were held: ModeProxy (the prover
	// held them all; statements of notaries without MPC mode, which
	// encode exactly as before the field existed: key 17 is omitted) or
	// ModeMPC (the notary held a share; see Reveals).
	Mode Mode
	// Reveals are, in MPC mode, the numbers of server records the notary
	// had committed when it revealed the keys of each server key epoch to
	// the prover during the session, in epoch order; epochs beyond them
	// were revealed only after the session had ended. A server record of
	// epoch e proves something only if its sequence number is below
	// Reveals[e] (VerifyPresentation checks this). Empty in proxy mode.
	Reveals []uint64

	raw []byte // the signed COSE_Sign1 bytes, after Sign or Parse
}

// Mode says who held a notarized session's keys.
type Mode uint8

// The modes of a notarized session.
const (
	// ModeProxy: the prover held every key; the notary recorded.
	ModeProxy Mode = 0
	// ModeMPC: the notary held a share of the session's secrets, and the
	// server's application keys were revealed to the prover only after
	// the notary had committed to the records they protect.
	ModeMPC Mode = 1
)

// String returns "proxy" or "mpc" (the names of DESIGN §3's mpcMode).
func (m Mode) String() string {
	switch m {
	case ModeProxy:
		return "proxy"
	case ModeMPC:
		return "mpc"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// MaxReveals bounds Statement.Reveals: the server key epochs a notary
// reveals during one MPC-mode session (one per response read), so that
// the worst-case statement stays within MaxStatementSize.
const MaxReveals = 300

// wireStatement is the CBOR payload: integer keys, byte strings of checked
// length, times as Unix milliseconds.
type wireStatement struct {
	V        uint64   `cbor:"1,keyasint"`
	Session  []byte   `cbor:"2,keyasint"`
	Start    int64    `cbor:"3,keyasint"`
	End      int64    `cbor:"4,keyasint"`
	SNI      string   `cbor:"5,keyasint"`
	Addr     string   `cbor:"6,keyasint"`
	Version  uint16   `cbor:"7,keyasint"`
	Suite    uint16   `cbor:"8,keyasint"`
	Chain    []byte   `cbor:"9,keyasint"`
	Root     []byte   `cbor:"10,keyasint"`
	CRecords uint64   `cbor:"11,keyasint"`
	CBytes   uint64   `cbor:"12,keyasint"`
	SRecords uint64   `cbor:"13,keyasint"`
	SBytes   uint64   `cbor:"14,keyasint"`
	KeyID    []byte   `cbor:"15,keyasint"`
	Subject  string   `cbor:"16,keyasint,omitempty"`
	Mode     uint8    `cbor:"17,keyasint,omitempty"`
	Reveals  []uint64 `cbor:"18,keyasint,omitempty"`
}

// MaxCertSubject bounds Statement.CertSubject.
const MaxCertSubject = 256

// KeyID returns the identifier of a notary public key: SHA-256 of the 32
// raw Ed25519 public key bytes.
func KeyID(pub ed25519.PublicKey) [32]byte { return sha256.Sum256(pub) }

// Raw returns the signed statement bytes (COSE_Sign1) this Statement was
// produced by Sign or parsed from, or nil.
func (s *Statement) Raw() []byte { return s.raw }

// Digest returns SHA-256 of the signed statement bytes, the value other
// documents use to bind a statement; zero if the statement has no bytes.
func (s *Statement) Digest() [32]byte {
	if s.raw == nil {
		return [32]byte{}
	}
	return sha256.Sum256(s.raw)
}

// Sign sets s.NotaryKeyID to the KeyID of key, checks that s is well
// formed, and returns the COSE_Sign1 (EdDSA) over the deterministic CBOR
// encoding of s. Times are truncated to milliseconds.
func (s *Statement) Sign(key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: notary key is not an ed25519 private key", ErrStatement)
	}
	s.NotaryKeyID = KeyID(key.Public().(ed25519.PublicKey))
	s.Start, s.End = s.Start.Truncate(time.Millisecond), s.End.Truncate(time.Millisecond)
	if err := s.check(); err != nil {
		return nil, err
	}
	payload, err := stmtCodec.enc.Marshal(s.wire())
	if err != nil {
		return nil, fmt.Errorf("%w: encoding: %w", ErrStatement, err)
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStatement, err)
	}
	msg := cose.NewSign1Message()
	msg.Headers.Protected.SetAlgorithm(cose.AlgorithmEdDSA)
	msg.Headers.Protected[cose.HeaderLabelContentType] = StatementContentType
	msg.Payload = payload
	if err := msg.Sign(rand.Reader, nil, signer); err != nil {
		return nil, fmt.Errorf("%w: signing: %w", ErrStatement, err)
	}
	b, err := msg.MarshalCBOR()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStatement, err)
	}
	s.raw = b
	return b, nil
}

func (s *Statement) wire() *wireStatement {
	return &wireStatement{
		V: StatementVersion, Session: s.SessionID[:],
		Start: s.Start.UnixMilli(), End: s.End.UnixMilli(),
		SNI: s.SNI, Addr: s.Address, Version: s.Version, Suite: s.CipherSuite,
		Chain: s.CertChainDigest[:], Root: s.Root[:],
		CRecords: s.ClientRecords, CBytes: s.ClientBytes,
		SRecords: s.ServerRecords, SBytes: s.ServerBytes,
		KeyID: s.NotaryKeyID[:], Subject: s.CertSubject,
		Mode: uint8(s.Mode), Reveals: s.Reveals,
	}
}

func stmtErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrStatement, fmt.Sprintf(format, a...))
}

// check enforces the well-formedness rules of a statement.
func (s *Statement) check() error {
	if s.SessionID == ([16]byte{}) {
		return stmtErr("empty session id")
	}
	if s.Start.IsZero() || s.End.IsZero() || s.Start.UnixMilli() <= 0 {
		return stmtErr("missing session times")
	}
	if s.End.Before(s.Start) {
		return stmtErr("session ends before it starts")
	}
	if err := checkHostname(s.SNI); err != nil {
		return stmtErr("sni: %v", err)
	}
	if ap, err := netip.ParseAddrPort(s.Address); err != nil || ap.Port() == 0 {
		return stmtErr("address %q is not ip:port", s.Address)
	}
	if _, err := suiteFor(s.Version, s.CipherSuite); err != nil {
		return fmt.Errorf("%w: %w", ErrStatement, err)
	}
	if len(s.CertSubject) > MaxCertSubject || !utf8.ValidString(s.CertSubject) || strings.ContainsFunc(s.CertSubject, unicode.IsControl) {
		return stmtErr("certificate subject is over %d bytes, not UTF-8, or holds control characters", MaxCertSubject)
	}
	if s.Root == ([32]byte{}) || s.CertChainDigest == ([32]byte{}) || s.NotaryKeyID == ([32]byte{}) {
		return stmtErr("missing digest")
	}
	switch {
	case s.Mode != ModeProxy && s.Mode != ModeMPC:
		return stmtErr("unknown mode %d", s.Mode)
	case s.Mode == ModeProxy && len(s.Reveals) != 0:
		return stmtErr("reveal points in a proxy-mode statement")
	case len(s.Reveals) > MaxReveals || s.Version == VersionTLS12 && len(s.Reveals) > 1:
		return stmtErr("%d reveal points", len(s.Reveals))
	}
	for i, r := range s.Reveals {
		if r > s.ServerRecords || i > 0 && r < s.Reveals[i-1] {
			return stmtErr("reveal points not increasing within the session")
		}
	}
	if s.ClientRecords == 0 || s.ServerRecords == 0 {
		return stmtErr("no records in a direction")
	}
	if s.ClientBytes < s.ClientRecords*(HeaderLen+1) || s.ServerBytes < s.ServerRecords*(HeaderLen+1) ||
		s.ClientBytes > s.ClientRecords*(HeaderLen+MaxFragment) || s.ServerBytes > s.ServerRecords*(HeaderLen+MaxFragment) {
		return stmtErr("byte counts inconsistent with record counts")
	}
	return nil
}

// checkHostname accepts a DNS name as it appears in server_name: ASCII
// letters, digits, hyphens and dots, 1..253 bytes, no empty label.
func checkHostname(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("empty or too long")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("empty or too long label")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("invalid character %q", c)
			}
		}
	}
	return nil
}

// ParseStatement decodes a signed statement and checks that it is well
// formed. It does NOT check the signature or whether the notary is
// trusted: use VerifyStatement for that.
func ParseStatement(b []byte) (*Statement, error) {
	s, _, err := parseStatement(b)
	return s, err
}

func parseStatement(b []byte) (*Statement, *cose.Sign1Message, error) {
	if len(b) > MaxStatementSize {
		return nil, nil, fmt.Errorf("%w: statement of %d bytes (limit %d)", ErrTooLarge, len(b), MaxStatementSize)
	}
	var msg cose.Sign1Message
	if err := msg.UnmarshalCBOR(b); err != nil {
		return nil, nil, fmt.Errorf("%w: cose: %w", ErrStatement, err)
	}
	alg, err := msg.Headers.Protected.Algorithm()
	if err != nil || alg != cose.AlgorithmEdDSA {
		return nil, nil, stmtErr("signature algorithm is not EdDSA")
	}
	if ct, ok := msg.Headers.Protected[cose.HeaderLabelContentType]; !ok || ct != StatementContentType {
		return nil, nil, stmtErr("content type is not %s", StatementContentType)
	}
	if len(msg.Headers.Protected) != 2 || len(msg.Headers.Unprotected) != 0 {
		return nil, nil, stmtErr("unexpected cose headers")
	}
	if msg.Payload == nil {
		return nil, nil, stmtErr("detached payload")
	}
	var w wireStatement
	if err := stmtCodec.decodeCanonical(msg.Payload, &w, ErrStatement); err != nil {
		return nil, nil, err
	}
	if w.V != StatementVersion {
		return nil, nil, stmtErr("version %d", w.V)
	}
	if len(w.Session) != 16 || len(w.Chain) != 32 || len(w.Root) != 32 || len(w.KeyID) != 32 {
		return nil, nil, stmtErr("field of wrong length")
	}
	s := &Statement{
		Start: time.UnixMilli(w.Start).UTC(), End: time.UnixMilli(w.End).UTC(),
		SNI: w.SNI, Address: w.Addr, Version: w.Version, CipherSuite: w.Suite,
		CertSubject: w.Subject,
		Mode:        Mode(w.Mode), Reveals: w.Reveals,
		ClientRecords: w.CRecords, ClientBytes: w.CBytes,
		ServerRecords: w.SRecords, ServerBytes: w.SBytes,
	}
	copy(s.SessionID[:], w.Session)
	copy(s.CertChainDigest[:], w.Chain)
	copy(s.Root[:], w.Root)
	copy(s.NotaryKeyID[:], w.KeyID)
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	s.raw = append([]byte(nil), b...)
	return s, &msg, nil
}

// Expect holds what a caller expects of a statement. Zero values are not
// checked.
type Expect struct {
	// SNI, when not empty, must equal the statement's SNI (ASCII case
	// insensitively).
	SNI string
	// NotBefore, when not zero, is the earliest acceptable session start.
	NotBefore time.Time
	// NotAfter, when not zero, is the latest acceptable session end.
	NotAfter time.Time
	// RequireMPC refuses a statement of a session not in MPC mode.
	RequireMPC bool
}

// VerifyStatement parses b, checks that it is signed by the notary key
// among trusted whose KeyID the statement names, and that it meets exp.
// It fails closed: an empty trusted list verifies nothing. Signature
// failures wrap ErrSignature, unmet expectations ErrExpectation (with an
// *ExpectationError). It does not check the session's records; see
// VerifyPresentation.
func VerifyStatement(b []byte, trusted []ed25519.PublicKey, exp Expect) (*Statement, error) {
	s, msg, err := parseStatement(b)
	if err != nil {
		return nil, err
	}
	var key ed25519.PublicKey
	for _, k := range trusted {
		if len(k) == ed25519.PublicKeySize && KeyID(k) == s.NotaryKeyID {
			key = k
			break
		}
	}
	if key == nil {
		return nil, fmt.Errorf("%w: notary key %x is not trusted", ErrSignature, s.NotaryKeyID[:8])
	}
	verifier, err := cose.NewVerifier(cose.AlgorithmEdDSA, key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if err := msg.Verify(nil, verifier); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if exp.RequireMPC && s.Mode != ModeMPC {
		return nil, &ExpectationError{Field: "mode", Want: ModeMPC.String(), Got: s.Mode.String()}
	}
	if exp.SNI != "" && !strings.EqualFold(exp.SNI, s.SNI) {
		return nil, &ExpectationError{Field: "sni", Want: exp.SNI, Got: s.SNI}
	}
	if !exp.NotBefore.IsZero() && s.Start.Before(exp.NotBefore.Truncate(time.Millisecond)) {
		return nil, &ExpectationError{Field: "not-before", Want: exp.NotBefore.UTC().Format(time.RFC3339Nano), Got: s.Start.Format(time.RFC3339Nano)}
	}
	if !exp.NotAfter.IsZero() && s.End.After(exp.NotAfter) {
		return nil, &ExpectationError{Field: "not-after", Want: exp.NotAfter.UTC().Format(time.RFC3339Nano), Got: s.End.Format(time.RFC3339Nano)}
	}
	return s, nil
}
