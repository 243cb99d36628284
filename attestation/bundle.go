package attestation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"fmt"
)

// BundleVersion is the bundle format version this package writes. Version
// 2 added optional claims (Claims.Entries, Claims.Query); ParseBundle
// also accepts version 1 bundles, whose claims carry neither, and refuses
// any other version with ErrUnsupportedVersion. A verifier built before
// version 2 refuses version 2 bundles as malformed ("version 2, want 1").
const BundleVersion = 2

// BundleVersion1 is the first bundle format version, still accepted.
const BundleVersion1 = 1

// ErrUnsupportedVersion marks a bundle of a format version this build does
// not read. It also matches ErrMalformed.
var ErrUnsupportedVersion = fmt.Errorf("%w: unsupported version", ErrMalformed)

// bootEvidenceVersion is the version field of boot evidence, whose layout
// has not changed since version 1.
const bootEvidenceVersion = 1

// Size limits for untrusted input. A bundle over MaxBundleSize is rejected
// before it is parsed.
const (
	MaxBundleSize           = 1 << 20   // whole bundle
	MaxEvidenceSize         = 512 << 10 // TPM evidence carries the event log
	MaxStatementSize        = 512 << 10 // COSE_Sign1 over the claims, a fetch's coverage included
	MaxNotaryStatements     = 16
	MaxNotaryStatementSize  = 32 << 10
	MaxSPKISize             = 512
	maxBootEvidenceWireSize = MaxEvidenceSize + 4<<10
)

// BootEvidence is what an enclave proves once per start: its profile, the
// hardware evidence whose report data is [BootReportData] of the keys and
// nonce below, and the public keys themselves. GET /v1/attestation serves
// it; every bundle embeds it.
type BootEvidence struct {
	// Profile is one of the Profile* constants.
	Profile string
	// Evidence is the profile-specific evidence (for SEV-SNP: the report and
	// certificates, see package sevsnp).
	Evidence []byte
	// SigningKey is the DER SubjectPublicKeyInfo of the P-256 key that signs
	// output claims.
	SigningKey []byte
	// TLSKey is the DER SubjectPublicKeyInfo of the enclave's P-256 TLS key,
	// or empty when the enclave serves no TLS.
	TLSKey []byte
	// Nonce is the random boot nonce, BootNonceSize bytes.
	Nonce []byte
}

// ReportData returns the report data the evidence must carry for these keys
// and nonce.
func (b BootEvidence) ReportData() [64]byte {
	return BootReportData(b.SigningKey, b.TLSKey, b.Nonce)
}

// SigningPublicKey parses SigningKey as a P-256 ECDSA public key.
func (b BootEvidence) SigningPublicKey() (*ecdsa.PublicKey, error) {
	return parseP256(b.SigningKey, "signingKey")
}

// TLSPublicKey parses TLSKey as a P-256 ECDSA public key. It returns
// (nil, nil) when there is no TLS key.
func (b BootEvidence) TLSPublicKey() (*ecdsa.PublicKey, error) {
	if len(b.TLSKey) == 0 {
		return nil, nil
	}
	return parseP256(b.TLSKey, "tlsKey")
}

func parseP256(spki []byte, field string) (*ecdsa.PublicKey, error) {
	pub, err := x509.ParsePKIXPublicKey(spki)
	if err != nil {
		return nil, malformed("boot evidence", field, "not a SubjectPublicKeyInfo")
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, malformed("boot evidence", field, "not an ECDSA P-256 key")
	}
	return ec, nil
}

// Bundle is the attestation bundle of one output: the enclave's boot
// evidence, the COSE_Sign1 statement over the output's [Claims], and the
// MPC-TLS notary statements the claims refer to.
type Bundle struct {
	Version int
	Boot    BootEvidence
	// Statement is a COSE_Sign1 (ES256) by Boot.SigningKey over the
	// deterministic CBOR encoding of the claims.
	Statement []byte
	// NotaryStatements are the notary-signed statements of the MPC-TLS
	// sessions the output was fetched through, in the order of the claims'
	// sessions. Empty for raw submissions.
	NotaryStatements [][]byte
}

// wireBundle is the CBOR layout of a bundle and (without keys 7 and 8) of
// boot evidence.
type wireBundle struct {
	Version          int      `cbor:"1,keyasint"`
	Profile          string   `cbor:"2,keyasint"`
	Evidence         []byte   `cbor:"3,keyasint"`
	SigningKey       []byte   `cbor:"4,keyasint"`
	TLSKey           []byte   `cbor:"5,keyasint,omitempty"`
	BootNonce        []byte   `cbor:"6,keyasint"`
	Statement        []byte   `cbor:"7,keyasint,omitempty"`
	NotaryStatements [][]byte `cbor:"8,keyasint,omitempty"`
}

// Marshal returns the deterministic CBOR encoding of the bundle. It checks
// the same structural rules as [ParseBundle], so what Marshal returns parses.
func (b *Bundle) Marshal() ([]byte, error) {
	w := wireBundle{
		Version:          b.Version,
		Profile:          b.Boot.Profile,
		Evidence:         b.Boot.Evidence,
		SigningKey:       b.Boot.SigningKey,
		TLSKey:           b.Boot.TLSKey,
		BootNonce:        b.Boot.Nonce,
		Statement:        b.Statement,
		NotaryStatements: b.NotaryStatements,
	}
	if err := checkWire(&w, true); err != nil {
		return nil, err
	}
	out, err := detEnc.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encoding bundle: %w", err)
	}
	if len(out) > MaxBundleSize {
		return nil, fmt.Errorf("bundle of %d bytes: %w", len(out), ErrTooLarge)
	}
	return out, nil
}

// ParseBundle decodes a bundle strictly (see [UnmarshalStrict]) and checks
// its structure: version, known profile, field sizes. It does not check any
// signature or evidence: that is package verify's job.
func ParseBundle(data []byte) (*Bundle, error) {
	var w wireBundle
	if err := UnmarshalStrict(data, &w, MaxBundleSize, "bundle"); err != nil {
		return nil, err
	}
	if err := checkWire(&w, true); err != nil {
		return nil, err
	}
	return &Bundle{
		Version: w.Version,
		Boot: BootEvidence{
			Profile:    w.Profile,
			Evidence:   w.Evidence,
			SigningKey: w.SigningKey,
			TLSKey:     w.TLSKey,
			Nonce:      w.BootNonce,
		},
		Statement:        w.Statement,
		NotaryStatements: w.NotaryStatements,
	}, nil
}

// Marshal returns the deterministic CBOR encoding of the boot evidence (the
// bundle layout without statement and notary statements).
func (b *BootEvidence) Marshal() ([]byte, error) {
	w := wireBundle{
		Version:    bootEvidenceVersion,
		Profile:    b.Profile,
		Evidence:   b.Evidence,
		SigningKey: b.SigningKey,
		TLSKey:     b.TLSKey,
		BootNonce:  b.Nonce,
	}
	if err := checkWire(&w, false); err != nil {
		return nil, err
	}
	return detEnc.Marshal(w)
}

// ParseBootEvidence decodes boot evidence strictly and checks its structure.
// It does not verify the evidence.
func ParseBootEvidence(data []byte) (*BootEvidence, error) {
	var w wireBundle
	if err := UnmarshalStrict(data, &w, maxBootEvidenceWireSize, "boot evidence"); err != nil {
		return nil, err
	}
	if err := checkWire(&w, false); err != nil {
		return nil, err
	}
	return &BootEvidence{
		Profile:    w.Profile,
		Evidence:   w.Evidence,
		SigningKey: w.SigningKey,
		TLSKey:     w.TLSKey,
		Nonce:      w.BootNonce,
	}, nil
}

func checkWire(w *wireBundle, isBundle bool) error {
	const s = "bundle"
	switch {
	case isBundle && (w.Version == BundleVersion1 || w.Version == BundleVersion):
	case !isBundle && w.Version == bootEvidenceVersion:
	default:
		return &FieldError{Struct: s, Field: "version", Reason: fmt.Sprintf("unsupported version %d", w.Version), Err: ErrUnsupportedVersion}
	}
	if !KnownProfile(w.Profile) {
		return &FieldError{Struct: s, Field: "profile", Reason: fmt.Sprintf("unknown profile %q", w.Profile), Err: ErrUnsupportedProfile}
	}
	switch {
	case len(w.Evidence) == 0:
		return malformed(s, "evidence", "missing")
	case len(w.Evidence) > MaxEvidenceSize:
		return &FieldError{Struct: s, Field: "evidence", Reason: "too large", Err: ErrTooLarge}
	case len(w.SigningKey) == 0:
		return malformed(s, "signingKey", "missing")
	case len(w.SigningKey) > MaxSPKISize || len(w.TLSKey) > MaxSPKISize:
		return &FieldError{Struct: s, Field: "signingKey", Reason: "too large", Err: ErrTooLarge}
	case len(w.BootNonce) != BootNonceSize:
		return malformed(s, "bootNonce", fmt.Sprintf("%d bytes, want %d", len(w.BootNonce), BootNonceSize))
	}
	if _, err := parseP256(w.SigningKey, "signingKey"); err != nil {
		return err
	}
	if len(w.TLSKey) > 0 {
		if _, err := parseP256(w.TLSKey, "tlsKey"); err != nil {
			return err
		}
	}
	if !isBundle {
		if len(w.Statement) != 0 || len(w.NotaryStatements) != 0 {
			return malformed("boot evidence", "statement", "boot evidence carries no statement")
		}
		return nil
	}
	switch {
	case len(w.Statement) == 0:
		return malformed(s, "statement", "missing")
	case len(w.Statement) > MaxStatementSize:
		return &FieldError{Struct: s, Field: "statement", Reason: "too large", Err: ErrTooLarge}
	case len(w.NotaryStatements) > MaxNotaryStatements:
		return &FieldError{Struct: s, Field: "notaryStatements", Reason: "too many", Err: ErrTooLarge}
	}
	for i, ns := range w.NotaryStatements {
		if len(ns) == 0 {
			return malformed(s, fmt.Sprintf("notaryStatements[%d]", i), "empty")
		}
		if len(ns) > MaxNotaryStatementSize {
			return &FieldError{Struct: s, Field: fmt.Sprintf("notaryStatements[%d]", i), Reason: "too large", Err: ErrTooLarge}
		}
	}
	return nil
}
