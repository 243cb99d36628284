package verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/acds-project/acds/attestation"
)

// Errors of attested TLS checks.
var (
	// ErrNoEvidence: the peer certificate carries no boot evidence (a plain
	// TLS server, or a TLS-terminating proxy in front of the enclave).
	ErrNoEvidence = errors.New("certificate carries no enclave boot evidence")
	// ErrTLSKeyNotBound: the certificate's key is not the TLS key the
	// evidence binds (for example evidence copied from another server).
	ErrTLSKeyNotBound = errors.New("certificate key is not the TLS key the evidence binds")
	// ErrCertificateTime: the certificate is not valid at the clock.
	ErrCertificateTime = errors.New("certificate not valid now")
)

// CertificateError is what [Verifier.VerifyConnection] returns when the
// peer is not an attested enclave under the policy; Result says why.
type CertificateError struct {
	Result *Result
}

func (e *CertificateError) Error() string {
	return "attested TLS: " + strings.Join(e.Result.Reasons(), "; ")
}

// Unwrap returns the failures, so errors.Is works with the Err* values.
func (e *CertificateError) Unwrap() error { return e.Result.Err() }

// VerifyCertificate checks an attested-TLS certificate: it must carry boot
// evidence (attestation.OIDBootEvidence) that verifies under the policy at
// the clock (see VerifyBoot, manifest validity included), be valid at the
// clock, and its public key must be the TLS key the evidence binds. It does
// not check the certificate's signature or names: the TLS handshake proves
// possession of the key, and the evidence, not a CA, says whose key it is.
// The evidence goes through the verifier's cache, so later connections to
// the same enclave cost a parse, two hashes and these checks.
func (v *Verifier) VerifyCertificate(cert *x509.Certificate) *Result {
	if !v.made() {
		r := &Result{}
		r.fail(CheckProfile, ErrNotMadeByNew)
		return r
	}
	now := v.p.Now()
	ev := attestation.BootEvidenceFromCertificate(cert)
	if ev == nil {
		r := &Result{VerifiedAt: now}
		r.fail(CheckEvidence, ErrNoEvidence)
		v.checkManifest(now, r)
		return r
	}
	r, err := v.VerifyBoot(ev)
	if err != nil {
		r = &Result{VerifiedAt: now}
		r.fail(CheckEvidence, fmt.Errorf("%w: %w", ErrEvidence, err))
		v.checkManifest(now, r)
		return r
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		r.fail(CheckTime, fmt.Errorf("%w: valid %s to %s", ErrCertificateTime, cert.NotBefore.UTC(), cert.NotAfter.UTC()))
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() || !bytes.Equal(r.Boot.TLSKey, cert.RawSubjectPublicKeyInfo) {
		// Not the same P-256 key encoded alike: parse the bound key and
		// say why it differs.
		bound, err := r.Boot.TLSPublicKey()
		switch {
		case err != nil:
			r.fail(CheckBinding, fmt.Errorf("%w: %w", ErrTLSKeyNotBound, err))
		case bound == nil:
			r.fail(CheckBinding, fmt.Errorf("%w: the evidence binds no TLS key", ErrTLSKeyNotBound))
		case !bound.Equal(cert.PublicKey):
			r.fail(CheckBinding, ErrTLSKeyNotBound)
		}
	}
	r.Valid = r.TEEQuoteVerified && r.EnclaveHashMatch && len(r.Failures) == 0
	return r
}

// VerifyConnection is a tls.Config.VerifyConnection for attested TLS: it
// accepts the handshake only when the peer's leaf certificate passes
// VerifyCertificate, and otherwise returns a *CertificateError, aborting
// the handshake before any application data is sent. Use it with
// InsecureSkipVerify: the evidence replaces CA-based verification.
func (v *Verifier) VerifyConnection(cs tls.ConnectionState) error {
	if !v.made() {
		return ErrNotMadeByNew
	}
	if len(cs.PeerCertificates) == 0 {
		r := &Result{VerifiedAt: v.p.Now()}
		r.fail(CheckEvidence, ErrNoEvidence)
		return &CertificateError{Result: r}
	}
	if r := v.VerifyCertificate(cs.PeerCertificates[0]); !r.Valid {
		return &CertificateError{Result: r}
	}
	return nil
}
