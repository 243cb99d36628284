package attestation

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/veraison/go-cose"
)

// ClaimsContentType is the COSE content type of a claims statement.
const ClaimsContentType = "application/vnd.acds.claims+cbor"

// Claims are what the enclave asserts about one output. They are signed
// with the boot key as a COSE_Sign1 over their deterministic CBOR encoding.
type Claims struct {
	// RequestID identifies the request that produced the output.
	RequestID string
	// OutputFormat is the output format, e.g. "fhir_r4".
	OutputFormat string
	// OutputDigest is "sha256:<lowercase hex>" of the output bytes.
	OutputDigest string
	// Source says where the input came from.
	Source Source
	// IssuedAt is when the enclave signed the claims (second precision).
	IssuedAt time.Time
	// Measurement is the TEE measurement (code hash) the enclave runs as.
	Measurement []byte
	// NotaryKey optionally names the Ed25519 public key of the enclave's
	// in-process notary. Verifiers trust it only when their policy says so
	// (a development relaxation).
	NotaryKey []byte
	// Entries, when set, commits to the output's entries one by one
	// (selective disclosure, package attestation/disclosure). Bundle
	// version 2 and later only.
	Entries *EntryCommitment
	// Query, when set, says the output (OutputDigest) is the result of a
	// FHIRPath query over a normalised record. Bundle version 2 and later
	// only.
	Query *QueryClaim
	// Coverage, when set, says what a fetched record was assembled from
	// (mpc-tls sources only). Claims made before it was signed have none;
	// they still verify, and say nothing of how complete the record is.
	Coverage *acds.Coverage
}

// EntryCommitment is the Merkle commitment to an output's entries: the
// RFC 6962 tree head over salted leaves, one per Bundle entry in order.
type EntryCommitment struct {
	// Root is the 32-byte tree head.
	Root []byte
	// Count is the number of entries (leaves), at least 1.
	Count int
}

// QueryClaim binds an attested query: its text and the record it ran on.
// The result is the output, whose digest is the claims' OutputDigest.
type QueryClaim struct {
	// Expression is the FHIRPath expression as submitted.
	Expression string
	// RecordDigest is "sha256:<hex>" of the canonical JSON of the
	// normalised record (the fhir_r4 output) the query was evaluated on.
	RecordDigest string
}

// Source is the provenance part of [Claims].
type Source struct {
	// Kind is acds.SourceRaw or acds.SourceMPCTLS.
	Kind string
	// InputDigest is "sha256:<hex>" of the submitted input (raw only).
	InputDigest string
	// Sessions are the notarized TLS sessions (mpc-tls only), at least one.
	Sessions []Session
}

// Session binds one notarized TLS session into the claims.
type Session struct {
	// StatementDigest is "sha256:<hex>" of the notary statement bytes as
	// they appear in the bundle.
	StatementDigest string
	// RequestLine is the HTTP request line sent, e.g. "GET /fhir/Patient/1 HTTP/1.1".
	RequestLine string
	// Host is the server name (SNI) of the session.
	Host string
}

type wireClaims struct {
	RequestID    string       `cbor:"1,keyasint"`
	OutputFormat string       `cbor:"2,keyasint"`
	OutputDigest string       `cbor:"3,keyasint"`
	Source       wireSource   `cbor:"4,keyasint"`
	IssuedAt     int64        `cbor:"5,keyasint"`
	Measurement  []byte       `cbor:"6,keyasint"`
	NotaryKey    []byte       `cbor:"7,keyasint,omitempty"`
	Entries      *wireEntries `cbor:"8,keyasint,omitempty"`
	Query        *wireQuery   `cbor:"9,keyasint,omitempty"`
	// Coverage is encoded by acds.Coverage's own cbor tags: the type is
	// declared once, in the wire contract.
	Coverage *acds.Coverage `cbor:"10,keyasint,omitempty"`
}

type wireEntries struct {
	Root  []byte `cbor:"1,keyasint"`
	Count int    `cbor:"2,keyasint"`
}

type wireQuery struct {
	Expression   string `cbor:"1,keyasint"`
	RecordDigest string `cbor:"2,keyasint"`
}

type wireSource struct {
	Kind        string        `cbor:"1,keyasint"`
	InputDigest string        `cbor:"2,keyasint,omitempty"`
	Sessions    []wireSession `cbor:"3,keyasint,omitempty"`
}

type wireSession struct {
	StatementDigest string `cbor:"1,keyasint"`
	RequestLine     string `cbor:"2,keyasint"`
	Host            string `cbor:"3,keyasint"`
}

const (
	maxClaimString = 2048
	maxSessions    = MaxNotaryStatements
	// maxCoverageRequests bounds a coverage's requests: the connector's
	// default bound on a record's FHIR responses is 2000.
	maxCoverageRequests = 4096
	// maxCoverageTypes bounds its unsupported types (R4 has 146).
	maxCoverageTypes = 256
)

// checkCoverage checks a coverage's structure: request lines of 1 to
// 2048 bytes, HTTP statuses, at least one page per request, no negative
// counts, and unsupported types named as FHIR types, sorted and distinct.
func checkCoverage(c *acds.Coverage) error {
	if c == nil {
		return nil
	}
	if len(c.Requests) == 0 {
		return malformed("claims", "coverage.requests", "a fetched record needs at least one request")
	}
	if len(c.Requests) > maxCoverageRequests {
		return &FieldError{Struct: "claims", Field: "coverage.requests", Reason: "too many", Err: ErrTooLarge}
	}
	for i, r := range c.Requests {
		switch {
		case r.RequestLine == "" || len(r.RequestLine) > maxClaimString:
			return malformed("claims", fmt.Sprintf("coverage.requests[%d].requestLine", i), "want 1 to 2048 bytes")
		case r.Status < 100 || r.Status > 599:
			return malformed("claims", fmt.Sprintf("coverage.requests[%d].status", i), "want an HTTP status")
		case r.Pages < 1 || r.Entries < 0:
			return malformed("claims", fmt.Sprintf("coverage.requests[%d]", i), "want at least one page and no negative count")
		}
	}
	if len(c.Unsupported) > maxCoverageTypes {
		return &FieldError{Struct: "claims", Field: "coverage.unsupported", Reason: "too many", Err: ErrTooLarge}
	}
	for i, t := range c.Unsupported {
		if !resourceTypeName(t) || (i > 0 && c.Unsupported[i-1] >= t) {
			return malformed("claims", fmt.Sprintf("coverage.unsupported[%d]", i), "want distinct resource type names, sorted")
		}
	}
	return nil
}

// resourceTypeName reports whether s has the syntax of a FHIR resource
// type name: an upper-case letter, then 1 to 63 letters.
func resourceTypeName(s string) bool {
	if len(s) < 2 || len(s) > 64 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, c := range []byte(s[1:]) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Digest returns "sha256:<lowercase hex>" of b, the digest format of claims.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func checkDigest(field, d string) error {
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hexPart) != 64 || strings.ToLower(hexPart) != hexPart {
		return malformed("claims", field, "want sha256:<64 lowercase hex digits>")
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return malformed("claims", field, "want sha256:<64 lowercase hex digits>")
	}
	return nil
}

func (c *Claims) toWire() (*wireClaims, error) {
	w := &wireClaims{
		RequestID:    c.RequestID,
		OutputFormat: c.OutputFormat,
		OutputDigest: c.OutputDigest,
		Source:       wireSource{Kind: c.Source.Kind, InputDigest: c.Source.InputDigest},
		IssuedAt:     c.IssuedAt.Unix(),
		Measurement:  c.Measurement,
		NotaryKey:    c.NotaryKey,
		Coverage:     c.Coverage,
	}
	if c.Entries != nil {
		w.Entries = &wireEntries{Root: c.Entries.Root, Count: c.Entries.Count}
	}
	if c.Query != nil {
		w.Query = &wireQuery{Expression: c.Query.Expression, RecordDigest: c.Query.RecordDigest}
	}
	for _, s := range c.Source.Sessions {
		w.Source.Sessions = append(w.Source.Sessions, wireSession(s))
	}
	return w, w.check()
}

func (w *wireClaims) toClaims() *Claims {
	c := &Claims{
		RequestID:    w.RequestID,
		OutputFormat: w.OutputFormat,
		OutputDigest: w.OutputDigest,
		Source:       Source{Kind: w.Source.Kind, InputDigest: w.Source.InputDigest},
		IssuedAt:     time.Unix(w.IssuedAt, 0).UTC(),
		Measurement:  w.Measurement,
		NotaryKey:    w.NotaryKey,
		Coverage:     w.Coverage,
	}
	if w.Entries != nil {
		c.Entries = &EntryCommitment{Root: w.Entries.Root, Count: w.Entries.Count}
	}
	if w.Query != nil {
		c.Query = &QueryClaim{Expression: w.Query.Expression, RecordDigest: w.Query.RecordDigest}
	}
	for _, s := range w.Source.Sessions {
		c.Source.Sessions = append(c.Source.Sessions, Session(s))
	}
	return c
}

func (w *wireClaims) check() error {
	for name, v := range map[string]string{"requestId": w.RequestID, "outputFormat": w.OutputFormat} {
		if v == "" {
			return malformed("claims", name, "missing")
		}
		if len(v) > maxClaimString {
			return &FieldError{Struct: "claims", Field: name, Reason: "too long", Err: ErrTooLarge}
		}
	}
	if err := checkDigest("outputDigest", w.OutputDigest); err != nil {
		return err
	}
	if w.IssuedAt <= 0 {
		return malformed("claims", "issuedAt", "missing or before 1970")
	}
	if len(w.Measurement) == 0 || len(w.Measurement) > 64 {
		return malformed("claims", "measurement", "want 1 to 64 bytes")
	}
	if len(w.NotaryKey) != 0 && len(w.NotaryKey) != 32 {
		return malformed("claims", "notaryKey", "want a 32-byte Ed25519 public key")
	}
	if e := w.Entries; e != nil {
		if len(e.Root) != 32 {
			return malformed("claims", "entries.root", "want a 32-byte SHA-256 tree head")
		}
		if e.Count < 1 || e.Count > 1<<24 {
			return malformed("claims", "entries.count", "want 1 to 16777216 entries")
		}
	}
	if q := w.Query; q != nil {
		if q.Expression == "" || len(q.Expression) > acds.MaxQueryLen {
			return malformed("claims", "query.expression", fmt.Sprintf("want 1 to %d bytes", acds.MaxQueryLen))
		}
		if err := checkDigest("query.recordDigest", q.RecordDigest); err != nil {
			return err
		}
	}
	if err := checkCoverage(w.Coverage); err != nil {
		return err
	}
	switch w.Source.Kind {
	case acds.SourceRaw:
		if w.Coverage != nil {
			return malformed("claims", "coverage", "a raw source was not fetched")
		}
		if len(w.Source.Sessions) != 0 {
			return malformed("claims", "source.sessions", "raw source has no sessions")
		}
		return checkDigest("source.inputDigest", w.Source.InputDigest)
	case acds.SourceMPCTLS:
		if w.Source.InputDigest != "" {
			return malformed("claims", "source.inputDigest", "mpc-tls source has no input digest")
		}
		if len(w.Source.Sessions) == 0 {
			return malformed("claims", "source.sessions", "mpc-tls source needs at least one session")
		}
		if len(w.Source.Sessions) > maxSessions {
			return &FieldError{Struct: "claims", Field: "source.sessions", Reason: "too many", Err: ErrTooLarge}
		}
		for i, s := range w.Source.Sessions {
			if err := checkDigest(fmt.Sprintf("source.sessions[%d].statementDigest", i), s.StatementDigest); err != nil {
				return err
			}
			if s.Host == "" || s.RequestLine == "" || len(s.Host) > maxClaimString || len(s.RequestLine) > maxClaimString {
				return malformed("claims", fmt.Sprintf("source.sessions[%d]", i), "host and request line must be 1 to 2048 bytes")
			}
		}
		return nil
	default:
		return malformed("claims", "source.kind", fmt.Sprintf("unknown source %q", w.Source.Kind))
	}
}

// MarshalClaims returns the deterministic CBOR encoding of c after checking
// it.
func MarshalClaims(c *Claims) ([]byte, error) {
	w, err := c.toWire()
	if err != nil {
		return nil, err
	}
	return detEnc.Marshal(w)
}

// ParseClaims decodes a claims payload strictly. It checks structure only.
func ParseClaims(payload []byte) (*Claims, error) {
	var w wireClaims
	if err := UnmarshalStrict(payload, &w, MaxStatementSize, "claims"); err != nil {
		return nil, err
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	return w.toClaims(), nil
}

// ClaimsSigner signs claims with a boot key. It is safe for concurrent use
// when the underlying key is.
type ClaimsSigner struct {
	signer cose.Signer
}

// NewClaimsSigner returns a signer for an ECDSA P-256 key (ES256).
func NewClaimsSigner(key crypto.Signer) (*ClaimsSigner, error) {
	s, err := cose.NewSigner(cose.AlgorithmES256, key)
	if err != nil {
		return nil, fmt.Errorf("claims signer: %w", err)
	}
	return &ClaimsSigner{signer: s}, nil
}

// Sign returns the COSE_Sign1 statement over c. rand is the signature
// randomness (crypto/rand.Reader in production).
func (s *ClaimsSigner) Sign(rand io.Reader, c *Claims) ([]byte, error) {
	payload, err := MarshalClaims(c)
	if err != nil {
		return nil, err
	}
	msg := cose.NewSign1Message()
	msg.Headers.Protected.SetAlgorithm(cose.AlgorithmES256)
	msg.Headers.Protected[cose.HeaderLabelContentType] = ClaimsContentType
	msg.Payload = payload
	if err := msg.Sign(rand, nil, s.signer); err != nil {
		return nil, fmt.Errorf("signing claims: %w", err)
	}
	return msg.MarshalCBOR()
}

// VerifyClaims checks that statement is a COSE_Sign1 (ES256, content type
// [ClaimsContentType], no unprotected headers, canonical encoding) signed by
// pub, and returns the claims it carries. It checks the signature and the
// claims' structure, nothing about what the claims say.
func VerifyClaims(statement []byte, pub *ecdsa.PublicKey) (*Claims, error) {
	if len(statement) > MaxStatementSize {
		return nil, fmt.Errorf("statement of %d bytes: %w", len(statement), ErrTooLarge)
	}
	var msg cose.Sign1Message
	if err := msg.UnmarshalCBOR(statement); err != nil {
		return nil, fmt.Errorf("statement: %w: %w", ErrMalformed, err)
	}
	alg, err := msg.Headers.Protected.Algorithm()
	if err != nil || alg != cose.AlgorithmES256 {
		return nil, malformed("statement", "alg", "want ES256")
	}
	if len(msg.Headers.Protected) != 2 || msg.Headers.Protected[cose.HeaderLabelContentType] != ClaimsContentType {
		return nil, malformed("statement", "protected", "want exactly alg and content type "+ClaimsContentType)
	}
	if len(msg.Headers.Unprotected) != 0 {
		return nil, malformed("statement", "unprotected", "must be empty")
	}
	again, err := msg.MarshalCBOR()
	if err != nil || !bytes.Equal(again, statement) {
		return nil, malformed("statement", "encoding", "not the canonical COSE_Sign1 encoding")
	}
	v, err := cose.NewVerifier(cose.AlgorithmES256, pub)
	if err != nil {
		return nil, fmt.Errorf("statement verifier: %w", err)
	}
	if err := msg.Verify(nil, v); err != nil {
		return nil, fmt.Errorf("claims statement: %w: %w", ErrSignature, err)
	}
	return ParseClaims(msg.Payload)
}
