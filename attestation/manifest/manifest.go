// Package manifest makes and checks signed reference-value manifests: the
// published list of code hashes (TEE measurements) an ACDS verifier accepts,
// per evidence profile, with minimum firmware TCB and the MPC-TLS notary keys
// it trusts.
//
// A signed manifest is a COSE_Sign1 (EdDSA, Ed25519) over the deterministic
// CBOR encoding of a [Manifest]. [Sign] makes one; [Verify] checks the
// signature against the publisher's key and the validity window against a
// clock, and returns the manifest. [ParseDescription] reads the JSON form
// operators write by hand (see [Description]).
package manifest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/veraison/go-cose"
)

// Error classes.
var (
	// ErrSignature: the manifest is not signed by the given key.
	ErrSignature = errors.New("manifest: signature does not verify")
	// ErrNotYetValid and ErrExpired: the clock is outside the validity
	// window.
	ErrNotYetValid = errors.New("manifest: not yet valid")
	ErrExpired     = errors.New("manifest: expired")
	// ErrInvalid: the manifest content is malformed.
	ErrInvalid = errors.New("manifest: invalid")
)

// ContentType is the COSE content type of a signed manifest.
const ContentType = "application/vnd.acds.manifest+cbor"

// MaxSize bounds a signed manifest.
const MaxSize = 256 << 10

// TCB is a minimum SEV-SNP firmware TCB, per component (security patch
// levels as in the VCEK certificate).
type TCB struct {
	Bootloader uint8 `json:"bootloader"`
	TEE        uint8 `json:"tee"`
	SNP        uint8 `json:"snp"`
	Microcode  uint8 `json:"microcode"`
}

// Profile holds the reference values of one evidence profile.
type Profile struct {
	// Measurements are the allowed code hashes.
	Measurements [][]byte
	// MinimumTCB is the lowest acceptable SEV-SNP TCB (sev-snp profiles
	// only). Nil: no minimum.
	MinimumTCB *TCB
}

// Manifest is a set of reference values.
type Manifest struct {
	// Issuer names who publishes the manifest.
	Issuer string
	// NotBefore and NotAfter bound when verifiers may use it.
	NotBefore, NotAfter time.Time
	// Profiles maps a profile name (attestation.Profile*) to its values.
	Profiles map[string]Profile
	// NotaryKeys are the trusted MPC-TLS notary public keys.
	NotaryKeys []ed25519.PublicKey
}

// Allows reports whether measurement is listed for profile.
func (m *Manifest) Allows(profile string, measurement []byte) bool {
	for _, x := range m.Profiles[profile].Measurements {
		if bytes.Equal(x, measurement) {
			return true
		}
	}
	return false
}

// ValidAt reports whether t is within the validity window, with a typed
// error when not.
func (m *Manifest) ValidAt(t time.Time) error {
	if t.Before(m.NotBefore) {
		return fmt.Errorf("%w: valid from %s", ErrNotYetValid, m.NotBefore.UTC().Format(time.RFC3339))
	}
	if t.After(m.NotAfter) {
		return fmt.Errorf("%w: expired %s", ErrExpired, m.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

type wireTCB struct {
	Bootloader uint8 `cbor:"1,keyasint"`
	TEE        uint8 `cbor:"2,keyasint"`
	SNP        uint8 `cbor:"3,keyasint"`
	Microcode  uint8 `cbor:"4,keyasint"`
}

type wireProfile struct {
	Name         string   `cbor:"1,keyasint"`
	Measurements [][]byte `cbor:"2,keyasint"`
	MinimumTCB   *wireTCB `cbor:"3,keyasint,omitempty"`
}

type wireManifest struct {
	Version    int           `cbor:"1,keyasint"`
	Issuer     string        `cbor:"2,keyasint"`
	NotBefore  int64         `cbor:"3,keyasint"`
	NotAfter   int64         `cbor:"4,keyasint"`
	Profiles   []wireProfile `cbor:"5,keyasint"`
	NotaryKeys [][]byte      `cbor:"6,keyasint,omitempty"`
}

func (m *Manifest) toWire() (*wireManifest, error) {
	w := &wireManifest{Version: 1, Issuer: m.Issuer, NotBefore: m.NotBefore.Unix(), NotAfter: m.NotAfter.Unix()}
	names := make([]string, 0, len(m.Profiles))
	for name := range m.Profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := m.Profiles[name]
		wp := wireProfile{Name: name, Measurements: p.Measurements}
		if p.MinimumTCB != nil {
			t := wireTCB(*p.MinimumTCB)
			wp.MinimumTCB = &t
		}
		w.Profiles = append(w.Profiles, wp)
	}
	for _, k := range m.NotaryKeys {
		w.NotaryKeys = append(w.NotaryKeys, []byte(k))
	}
	return w, w.check()
}

func (w *wireManifest) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
	}
	if w.Version != 1 {
		return bad("version %d, want 1", w.Version)
	}
	if w.Issuer == "" || len(w.Issuer) > 256 {
		return bad("issuer must be 1 to 256 bytes")
	}
	if w.NotBefore <= 0 || w.NotAfter <= w.NotBefore {
		return bad("validity: notAfter must be after notBefore")
	}
	if len(w.Profiles) == 0 {
		return bad("no profiles")
	}
	for i, p := range w.Profiles {
		if !attestation.KnownProfile(p.Name) {
			return bad("unknown profile %q", p.Name)
		}
		if i > 0 && w.Profiles[i-1].Name >= p.Name {
			return bad("profiles must be sorted and unique")
		}
		if len(p.Measurements) == 0 {
			return bad("profile %s lists no measurements", p.Name)
		}
		for _, m := range p.Measurements {
			if len(m) == 0 || len(m) > 64 {
				return bad("profile %s: measurement of %d bytes", p.Name, len(m))
			}
		}
		if p.MinimumTCB != nil && p.Name != attestation.ProfileSEVSNP && p.Name != attestation.ProfileSEVSNPSim {
			return bad("profile %s: minimumTcb applies to sev-snp profiles only", p.Name)
		}
	}
	for _, k := range w.NotaryKeys {
		if len(k) != ed25519.PublicKeySize {
			return bad("notary key of %d bytes, want %d", len(k), ed25519.PublicKeySize)
		}
	}
	return nil
}

func (w *wireManifest) toManifest() *Manifest {
	m := &Manifest{
		Issuer:    w.Issuer,
		NotBefore: time.Unix(w.NotBefore, 0).UTC(),
		NotAfter:  time.Unix(w.NotAfter, 0).UTC(),
		Profiles:  make(map[string]Profile, len(w.Profiles)),
	}
	for _, p := range w.Profiles {
		mp := Profile{Measurements: p.Measurements}
		if p.MinimumTCB != nil {
			t := TCB(*p.MinimumTCB)
			mp.MinimumTCB = &t
		}
		m.Profiles[p.Name] = mp
	}
	for _, k := range w.NotaryKeys {
		m.NotaryKeys = append(m.NotaryKeys, ed25519.PublicKey(k))
	}
	return m
}

// Sign returns the signed manifest: COSE_Sign1 (EdDSA) by key over the
// deterministic CBOR encoding of m. rand may be nil (Ed25519 is
// deterministic).
func Sign(rand io.Reader, m *Manifest, key ed25519.PrivateKey) ([]byte, error) {
	w, err := m.toWire()
	if err != nil {
		return nil, err
	}
	payload, err := attestation.MarshalDeterministic(w)
	if err != nil {
		return nil, err
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, key)
	if err != nil {
		return nil, fmt.Errorf("manifest signer: %w", err)
	}
	msg := cose.NewSign1Message()
	msg.Headers.Protected.SetAlgorithm(cose.AlgorithmEdDSA)
	msg.Headers.Protected[cose.HeaderLabelContentType] = ContentType
	msg.Payload = payload
	if err := msg.Sign(rand, nil, signer); err != nil {
		return nil, fmt.Errorf("signing manifest: %w", err)
	}
	return msg.MarshalCBOR()
}

// Verify checks that signed is a manifest signed by pub and valid at now,
// and returns it. It checks the signature, the structure and the validity
// window; what the manifest says is the caller's policy.
func Verify(signed []byte, pub ed25519.PublicKey, now time.Time) (*Manifest, error) {
	m, err := verifySignature(signed, pub)
	if err != nil {
		return nil, err
	}
	if err := m.ValidAt(now); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckSigned reports whether data has the shape of a signed manifest (a
// COSE_Sign1 message, EdDSA, content type [ContentType]) without checking
// its signature or content: a tool can tell "this is not a signed manifest"
// from "no key was given" before it has the publisher's key. The error
// wraps ErrInvalid and says what data is not.
func CheckSigned(data []byte) error {
	if len(data) > MaxSize {
		return fmt.Errorf("%w: %d bytes exceeds %d", ErrInvalid, len(data), MaxSize)
	}
	_, err := parseSigned(data)
	return err
}

// parseSigned decodes the COSE_Sign1 envelope of a signed manifest and
// checks its protected headers; the signature is not checked.
func parseSigned(signed []byte) (*cose.Sign1Message, error) {
	var msg cose.Sign1Message
	if err := msg.UnmarshalCBOR(signed); err != nil {
		return nil, fmt.Errorf("%w: not a COSE_Sign1 message: %v", ErrInvalid, err)
	}
	if alg, err := msg.Headers.Protected.Algorithm(); err != nil || alg != cose.AlgorithmEdDSA {
		return nil, fmt.Errorf("%w: algorithm is not EdDSA", ErrInvalid)
	}
	if msg.Headers.Protected[cose.HeaderLabelContentType] != ContentType {
		return nil, fmt.Errorf("%w: content type is not %s", ErrInvalid, ContentType)
	}
	return &msg, nil
}

func verifySignature(signed []byte, pub ed25519.PublicKey) (*Manifest, error) {
	if len(signed) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrInvalid, len(signed), MaxSize)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: public key of %d bytes", ErrSignature, len(pub))
	}
	msg, err := parseSigned(signed)
	if err != nil {
		return nil, err
	}
	v, err := cose.NewVerifier(cose.AlgorithmEdDSA, pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	if err := msg.Verify(nil, v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	var w wireManifest
	if err := attestation.UnmarshalStrict(msg.Payload, &w, MaxSize, "manifest"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	return w.toManifest(), nil
}

// HexMeasurement formats a measurement the way manifests and `acds measure`
// print it: lowercase hex.
func HexMeasurement(m []byte) string { return hex.EncodeToString(m) }
