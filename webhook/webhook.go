// Package webhook is the signed completion callback of ACDS (DESIGN §10):
// when a request that named a callbackUrl ends, the service POSTs a
// [Payload] to it, signed by the enclave's attested boot signing key as a
// detached JWS (RFC 7515 Appendix F; ES256) in the [SignatureHeader]
// header, with an [IdempotencyHeader] that is the same on every retry of
// the same delivery.
//
// A receiver checks a delivery with [Verify]: the boot evidence (the boot
// field of GET /v1/attestation, or the boot evidence of any bundle of the
// same enclave) must be valid under the receiver's verify.Policy, and the
// signature must be by the signing key that evidence binds. Then the
// payload was sent by that enclave, running a code hash the policy allows.
//
//	p, res, err := webhook.Verify(v, boot, r.Header.Get(webhook.SignatureHeader), body)
//	if err != nil { http.Error(w, "not from the enclave", 401); return }
//	// p.RequestID ended with p.Status (res says why the enclave is trusted)
//
// Deliveries are at least once: a receiver deduplicates with the
// idempotency key. The package does no networking (the server sends, the
// receiver serves) and imports no net/http.
package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/verify"
)

const (
	// SignatureHeader carries the detached compact JWS of the body.
	SignatureHeader = "ACDS-Signature"
	// IdempotencyHeader carries the delivery's idempotency key: the same
	// on every attempt of one delivery.
	IdempotencyHeader = "Idempotency-Key"
	// MaxPayloadSize bounds a delivery body a receiver should read.
	MaxPayloadSize = 64 << 10
)

// Payload is the body of a delivery: {requestId, status, outputDigest?,
// error?}, as JSON.
type Payload struct {
	RequestID string `json:"requestId"`
	// Status is acds.StatusCompleted or acds.StatusFailed.
	Status string `json:"status"`
	// OutputDigest is the attested output digest of a completed request.
	OutputDigest string `json:"outputDigest,omitempty"`
	// Error is the problem a failed request ended with.
	Error *acds.Problem `json:"error,omitempty"`
}

// Errors of Verify; each failure wraps one.
var (
	// ErrEnclave: the boot evidence is not valid under the policy.
	ErrEnclave = errors.New("webhook: the enclave is not trusted under the policy")
	// ErrSignature: the signature is malformed or not by the enclave's
	// signing key over this body.
	ErrSignature = errors.New("webhook: signature does not verify")
	// ErrPayload: the body is not a delivery payload.
	ErrPayload = errors.New("webhook: not a delivery payload")
)

// SignFunc signs a JWS signing input with the enclave's boot signing key
// and returns R‖S (attestation.Enclave.SignJWS is one).
type SignFunc func(signingInput []byte) ([]byte, error)

// KeyID is the "kid" of a delivery's JWS header: hex SHA-256 of the
// signing key's SubjectPublicKeyInfo, naming the boot key (a new boot has
// a new key).
func KeyID(signingKeySPKI []byte) string {
	h := sha256.Sum256(signingKeySPKI)
	return hex.EncodeToString(h[:])
}

// Sign returns the detached compact JWS (header..signature) of body,
// signed by sign (ES256) with kid KeyID(signingKeySPKI).
func Sign(sign SignFunc, signingKeySPKI, body []byte) (string, error) {
	hdr, err := json.Marshal(map[string]string{"alg": "ES256", "kid": KeyID(signingKeySPKI)})
	if err != nil {
		return "", err
	}
	h := base64.RawURLEncoding.EncodeToString(hdr)
	input := h + "." + base64.RawURLEncoding.EncodeToString(body)
	sig, err := sign([]byte(input))
	if err != nil {
		return "", fmt.Errorf("webhook: signing: %w", err)
	}
	if len(sig) != 64 {
		return "", fmt.Errorf("webhook: signing: an ES256 signature is 64 bytes, got %d", len(sig))
	}
	return h + ".." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Verify checks a delivery: boot (boot evidence, CBOR, as GET
// /v1/attestation's boot field or a bundle carries it) is valid under v's
// policy (v.VerifyBoot), and signature (the SignatureHeader value) is a
// detached ES256 JWS over body by the signing key that evidence binds.
// It returns the payload and the boot verification result, or an error
// wrapping ErrEnclave, ErrSignature or ErrPayload. It does not check
// that the receiver expected this request id (the receiver's business)
// or deduplicate (use the idempotency key).
func Verify(v *verify.Verifier, boot []byte, signature string, body []byte) (*Payload, *verify.Result, error) {
	if len(body) > MaxPayloadSize {
		return nil, nil, fmt.Errorf("%w: larger than %d bytes", ErrPayload, MaxPayloadSize)
	}
	res, err := v.VerifyBoot(boot)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrEnclave, err)
	}
	if !res.Valid {
		return nil, res, fmt.Errorf("%w: %w", ErrEnclave, res.Err())
	}
	pub, err := res.Boot.SigningPublicKey()
	if err != nil {
		return nil, res, fmt.Errorf("%w: %w", ErrEnclave, err)
	}
	if len(signature) > 1024 {
		return nil, res, fmt.Errorf("%w: header too long", ErrSignature)
	}
	jws, err := jose.ParseDetached(signature, body, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, res, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if len(jws.Signatures) != 1 || jws.Signatures[0].Header.KeyID != KeyID(res.Boot.SigningKey) {
		return nil, res, fmt.Errorf("%w: not signed with this enclave's boot key (kid)", ErrSignature)
	}
	if err := jws.DetachedVerify(body, pub); err != nil {
		return nil, res, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.RequestID == "" || (p.Status != acds.StatusCompleted && p.Status != acds.StatusFailed) {
		return nil, res, fmt.Errorf("%w: want {requestId, status: completed|failed, outputDigest?, error?}", ErrPayload)
	}
	return &p, res, nil
}
