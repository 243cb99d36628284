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
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"time"
)

// Backend is the trusted execution environment an [Enclave] runs in: it
// knows its profile and measurement, produces evidence binding 64 bytes of
// report data, and provides a sealing key. Package attestation/sim (the
// simulated SEV-SNP enclave) and the device packages
// attestation/sevsnp/device, attestation/tdx/device and
// attestation/tpm/device implement it.
type Backend interface {
	// Profile returns one of the Profile* constants.
	Profile() string
	// Measurement returns the code hash of what runs in the TEE.
	Measurement() []byte
	// Quote returns profile-specific evidence whose report data is
	// reportData.
	Quote(ctx context.Context, reportData [64]byte) ([]byte, error)
	// SealingKey returns the 32-byte AES-256 key that seals data for this
	// enclave (derived by the hardware, sealed by the TPM, or kept in the
	// data directory of a simulated enclave), or an error wrapping
	// [ErrNoSealingKey] when the hardware offers none.
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
	keyID       [sealKeyIDSize]byte // identifies the sealing key in what Seal returns
	persistent  bool                // the sealing key survives a restart
	rand        io.Reader
	now         func() time.Time
}

// New starts an enclave on backend: it makes the boot keys and nonce,
// obtains one quote binding them (see [BootReportData]) and loads the
// sealing key. A backend without a sealing key ([ErrNoSealingKey]) gets a
// random one for this boot, kept in memory only.
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
	e.persistent = true
	if errors.Is(err, ErrNoSealingKey) {
		// Sealed data lives as long as this boot: the key is in memory only.
		key, err, e.persistent = make([]byte, 32), nil, false
		if _, rerr := io.ReadFull(rand.Reader, key); rerr != nil {
			return nil, fmt.Errorf("per-boot sealing key: %w", rerr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	if e.aead, err = newAEAD(key); err != nil {
		return nil, err
	}
	e.keyID = sealKeyID(key)
	clear(key)
	return e, nil
}

// sealKeyIDSize is the size of the sealing-key identifier in sealed data.
const sealKeyIDSize = 8

// sealKeyID identifies a sealing key without revealing it: a truncated
// SHA-256 of a fixed label and the key.
func sealKeyID(key []byte) [sealKeyIDSize]byte {
	h := sha256.Sum256(append([]byte("acds/v1/sealing-key-id\x00"), key...))
	var id [sealKeyIDSize]byte
	copy(id[:], h[:])
	return id
}

// PersistentSealing reports whether what Seal returns can be opened after
// a restart: false when the backend offers no sealing key (TDX) and the
// enclave seals with a key made for this boot.
func (e *Enclave) PersistentSealing() bool { return e.persistent }

// SealingKeyID identifies the sealing key (8 bytes of a hash of it, which
// reveal nothing of the key): replicas and boots that share it can open
// each other's sealed data. Every value Seal returns carries it.
func (e *Enclave) SealingKeyID() []byte { return bytes.Clone(e.keyID[:]) }

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

// Sealed data formats: version 1 is version ‖ nonce ‖ ciphertext;
// version 2 (what Seal writes) is version ‖ key id ‖ nonce ‖ ciphertext,
// with version and key id authenticated as associated data.
const (
	sealVersion1 = 1
	sealVersion  = 2
)

// Seal encrypts plaintext with the enclave's sealing key (AES-256-GCM with a
// random nonce), binding associatedData, which Open must be given unchanged.
// The result names the sealing key by [Enclave.SealingKeyID], so that Open
// can tell data sealed under another key from tampered data.
func (e *Enclave) Seal(plaintext, associatedData []byte) ([]byte, error) {
	head := 1 + sealKeyIDSize
	out := make([]byte, head+e.aead.NonceSize(), head+e.aead.NonceSize()+len(plaintext)+e.aead.Overhead())
	out[0] = sealVersion
	copy(out[1:], e.keyID[:])
	if _, err := io.ReadFull(e.rand, out[head:]); err != nil {
		return nil, fmt.Errorf("seal nonce: %w", err)
	}
	return e.aead.Seal(out, out[head:], plaintext, sealAD(out[:head], associatedData)), nil
}

func sealAD(head, associatedData []byte) []byte {
	return append(append(make([]byte, 0, len(head)+len(associatedData)), head...), associatedData...)
}

// SealedKeyID returns the sealing-key identifier sealed data carries (see
// [Enclave.SealingKeyID]), or nil for data of the first format, which
// carries none, and for data too short to hold one.
func SealedKeyID(sealed []byte) []byte {
	if len(sealed) < 1+sealKeyIDSize || sealed[0] != sealVersion {
		return nil
	}
	return bytes.Clone(sealed[1 : 1+sealKeyIDSize])
}

// Open decrypts what Seal returned. Any tampering, a different key or
// different associated data yields an error wrapping [ErrSealed]; data
// sealed under another sealing key wraps [ErrSealedByOtherKey].
func (e *Enclave) Open(sealed, associatedData []byte) ([]byte, error) {
	n := e.aead.NonceSize()
	if len(sealed) == 0 {
		return nil, fmt.Errorf("sealed data malformed: %w", ErrSealed)
	}
	switch sealed[0] {
	case sealVersion1:
		if len(sealed) < 1+n+e.aead.Overhead() {
			return nil, fmt.Errorf("sealed data malformed: %w", ErrSealed)
		}
		pt, err := e.aead.Open(nil, sealed[1:1+n], sealed[1+n:], associatedData)
		if err != nil {
			return nil, fmt.Errorf("sealed data does not authenticate: %w", ErrSealed)
		}
		return pt, nil
	case sealVersion:
		head := 1 + sealKeyIDSize
		if len(sealed) < head+n+e.aead.Overhead() {
			return nil, fmt.Errorf("sealed data malformed: %w", ErrSealed)
		}
		if !bytes.Equal(sealed[1:head], e.keyID[:]) {
			return nil, fmt.Errorf("sealed data names sealing key %x, this enclave's is %x: %w", sealed[1:head], e.keyID[:], ErrSealedByOtherKey)
		}
		pt, err := e.aead.Open(nil, sealed[head:head+n], sealed[head+n:], sealAD(sealed[:head], associatedData))
		if err != nil {
			return nil, fmt.Errorf("sealed data does not authenticate: %w", ErrSealed)
		}
		return pt, nil
	}
	return nil, fmt.Errorf("sealed data of unknown format %d: %w", sealed[0], ErrSealed)
}
