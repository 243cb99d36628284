package attestation

import (
	"bytes"
	"context"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"io"
	"time"
)

// Backend is the trusted execution environment an [Enclave] runs in: it
// knows its profile and measurement, produces evidence binding 64 bytes of
// report data, and provides a sealing key. Packages attestation/sim and
// attestation/sevsnp implement it.
type Backend interface {
	// Profile returns one of the Profile* constants.
	Profile() string
	// Measurement returns the code hash of what runs in the TEE.
	Measurement() []byte
	// Quote returns profile-specific evidence whose report data is
	// reportData.
	Quote(ctx context.Context, reportData [64]byte) ([]byte, error)
	// SealingKey returns the 32-byte AES-256 key that seals data for this
	// enclave (derived by the hardware, or kept in the data directory of a
	// simulated enclave).
	SealingKey(ctx context.Context) ([]byte, error)
}

// Options configure [New]. The zero value is a production configuration
// without a TLS key.
type Options struct {
	// TLS makes a separate P-256 TLS key bound by the same boot quote.
	// Zero value: no TLS key.
	TLS bool
	// Rand is the source of nonces and signature randomness. Zero value:
	// crypto/rand.Reader. Keys always come from crypto/rand.
	Rand io.Reader
	// Now is the clock for claims' issue time. Zero value: time.Now.
	Now func() time.Time
}

// Enclave is a running enclave: per-boot keys, the one boot quote binding
// them, and the sealing key. Private keys never leave the value. It is safe
// for concurrent use.
type Enclave struct {
	profile     string
	measurement []byte
	boot        BootEvidence
	bootWire    []byte
	signer      *ClaimsSigner
	tlsKey      *ecdsa.PrivateKey
	aead        cipher.AEAD
	rand        io.Reader
	now         func() time.Time
}

// New starts an enclave on backend: it makes the boot keys and nonce,
// obtains one quote binding them (see [BootReportData]) and loads the
// sealing key.
func New(ctx context.Context, backend Backend, opts Options) (*Enclave, error) {
	e := &Enclave{profile: backend.Profile(), measurement: bytes.Clone(backend.Measurement()), rand: opts.Rand, now: opts.Now}
	if e.rand == nil {
		e.rand = rand.Reader
	}
	if e.now == nil {
		e.now = time.Now
	}
	if !KnownProfile(e.profile) {
		return nil, fmt.Errorf("backend profile %q: %w", e.profile, ErrUnsupportedProfile)
	}
	signing, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("boot signing key: %w", err)
	}
	if e.signer, err = NewClaimsSigner(signing); err != nil {
		return nil, err
	}
	signingSPKI, err := x509.MarshalPKIXPublicKey(&signing.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("boot signing key: %w", err)
	}
	var tlsSPKI []byte
	if opts.TLS {
		if e.tlsKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, fmt.Errorf("boot TLS key: %w", err)
		}
		if tlsSPKI, err = x509.MarshalPKIXPublicKey(&e.tlsKey.PublicKey); err != nil {
			return nil, fmt.Errorf("boot TLS key: %w", err)
		}
	}
	nonce := make([]byte, BootNonceSize)
	if _, err := io.ReadFull(e.rand, nonce); err != nil {
		return nil, fmt.Errorf("boot nonce: %w", err)
	}
	evidence, err := backend.Quote(ctx, BootReportData(signingSPKI, tlsSPKI, nonce))
	if err != nil {
		return nil, fmt.Errorf("boot quote: %w", err)
	}
	e.boot = BootEvidence{Profile: e.profile, Evidence: evidence, SigningKey: signingSPKI, TLSKey: tlsSPKI, Nonce: nonce}
	if e.bootWire, err = e.boot.Marshal(); err != nil {
		return nil, fmt.Errorf("boot evidence: %w", err)
	}
	key, err := backend.SealingKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	if e.aead, err = newAEAD(key); err != nil {
		return nil, err
	}
	return e, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("sealing key is %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	return cipher.NewGCM(block)
}

// Profile returns the enclave's profile.
func (e *Enclave) Profile() string { return e.profile }

// Measurement returns the enclave's code hash (a copy).
func (e *Enclave) Measurement() []byte { return bytes.Clone(e.measurement) }

// BootEvidence returns the boot evidence (a copy): what GET /v1/attestation
// serves and every bundle embeds.
func (e *Enclave) BootEvidence() BootEvidence {
	b := e.boot
	b.Evidence = bytes.Clone(b.Evidence)
	b.SigningKey = bytes.Clone(b.SigningKey)
	b.TLSKey = bytes.Clone(b.TLSKey)
	b.Nonce = bytes.Clone(b.Nonce)
	return b
}

// MarshalBootEvidence returns the deterministic CBOR encoding of the boot
// evidence (see [ParseBootEvidence]).
func (e *Enclave) MarshalBootEvidence() []byte { return bytes.Clone(e.bootWire) }

// Attest signs claims about one output and returns the encoded [Bundle].
//
// It fills in what the enclave knows: IssuedAt (when zero) from the clock,
// Measurement from the backend (a different non-empty value is an error), and
// each session's StatementDigest (when empty) from the notary statement at the
// same index. notaryStatements must correspond one to one with
// claims.Source.Sessions.
func (e *Enclave) Attest(ctx context.Context, claims Claims, notaryStatements [][]byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if claims.IssuedAt.IsZero() {
		claims.IssuedAt = e.now()
	}
	if len(claims.Measurement) == 0 {
		claims.Measurement = e.measurement
	} else if !bytes.Equal(claims.Measurement, e.measurement) {
		return nil, malformed("claims", "measurement", "differs from the enclave's measurement")
	}
	if len(notaryStatements) != len(claims.Source.Sessions) {
		return nil, malformed("claims", "source.sessions", fmt.Sprintf("%d sessions but %d notary statements", len(claims.Source.Sessions), len(notaryStatements)))
	}
	sessions := make([]Session, len(claims.Source.Sessions))
	copy(sessions, claims.Source.Sessions)
	for i := range sessions {
		d := Digest(notaryStatements[i])
		if sessions[i].StatementDigest == "" {
			sessions[i].StatementDigest = d
		} else if sessions[i].StatementDigest != d {
			return nil, malformed("claims", fmt.Sprintf("source.sessions[%d].statementDigest", i), "does not match the notary statement")
		}
	}
	claims.Source.Sessions = sessions
	stmt, err := e.signer.Sign(e.rand, &claims)
	if err != nil {
		return nil, err
	}
	b := Bundle{Version: BundleVersion, Boot: e.boot, Statement: stmt, NotaryStatements: notaryStatements}
	return b.Marshal()
}

// TLSSigner returns the enclave's TLS key as a crypto.Signer whose private
// half cannot be extracted, or nil when the enclave was started without
// Options.TLS.
func (e *Enclave) TLSSigner() crypto.Signer {
	if e.tlsKey == nil {
		return nil
	}
	return tlsSigner{e.tlsKey}
}

type tlsSigner struct{ k *ecdsa.PrivateKey }

func (s tlsSigner) Public() crypto.PublicKey { return &s.k.PublicKey }

func (s tlsSigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.k.Sign(r, digest, opts)
}

const sealVersion = 1

// Seal encrypts plaintext with the enclave's sealing key (AES-256-GCM with a
// random nonce), binding associatedData, which Open must be given unchanged.
func (e *Enclave) Seal(plaintext, associatedData []byte) ([]byte, error) {
	out := make([]byte, 1+e.aead.NonceSize(), 1+e.aead.NonceSize()+len(plaintext)+e.aead.Overhead())
	out[0] = sealVersion
	if _, err := io.ReadFull(e.rand, out[1:]); err != nil {
		return nil, fmt.Errorf("seal nonce: %w", err)
	}
	return e.aead.Seal(out, out[1:], plaintext, associatedData), nil
}

// Open decrypts what Seal returned. Any tampering, a different key or
// different associated data yields an error wrapping [ErrSealed].
func (e *Enclave) Open(sealed, associatedData []byte) ([]byte, error) {
	n := e.aead.NonceSize()
	if len(sealed) < 1+n+e.aead.Overhead() || sealed[0] != sealVersion {
		return nil, fmt.Errorf("sealed data malformed: %w", ErrSealed)
	}
	pt, err := e.aead.Open(nil, sealed[1:1+n], sealed[1+n:], associatedData)
	if err != nil {
		return nil, fmt.Errorf("sealed data does not authenticate: %w", ErrSealed)
	}
	return pt, nil
}
