package verify

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"

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
// the clock (see VerifyBoot), be valid at the clock, and its public key must
// be the TLS key the evidence binds. It does not check the certificate's
// signature or names: the TLS handshake proves possession of the key, and
// the evidence, not a CA, says whose key it is. Valid results are cached per
// certificate, so later connections to the same enclave cost a hash; the
// returned Result may be shared and must not be modified.
func (v *Verifier) VerifyCertificate(cert *x509.Certificate) *Result {
	now := v.p.Now()
	key := sha256.Sum256(cert.Raw)
	if r, ok := v.certs.get(key); ok && !now.Before(cert.NotBefore) && !now.After(cert.NotAfter) {
		return r
	}
	ev := attestation.BootEvidenceFromCertificate(cert)
	if ev == nil {
		r := &Result{VerifiedAt: now}
		r.fail(CheckEvidence, ErrNoEvidence)
		return r
	}
	r, err := v.VerifyBoot(ev)
	if err != nil {
		r = &Result{VerifiedAt: now}
		r.fail(CheckEvidence, fmt.Errorf("%w: %w", ErrEvidence, err))
		return r
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		r.fail(CheckTime, fmt.Errorf("%w: valid %s to %s", ErrCertificateTime, cert.NotBefore.UTC(), cert.NotAfter.UTC()))
	}
	bound, err := r.Boot.TLSPublicKey()
	switch {
	case err != nil:
		r.fail(CheckBinding, fmt.Errorf("%w: %w", ErrTLSKeyNotBound, err))
	case bound == nil:
		r.fail(CheckBinding, fmt.Errorf("%w: the evidence binds no TLS key", ErrTLSKeyNotBound))
	case !bound.Equal(cert.PublicKey):
		r.fail(CheckBinding, ErrTLSKeyNotBound)
	}
	r.Valid = r.TEEQuoteVerified && r.EnclaveHashMatch && len(r.Failures) == 0
	if r.Valid {
		v.certs.put(key, r)
	}
	return r
}

// VerifyConnection is a tls.Config.VerifyConnection for attested TLS: it
// accepts the handshake only when the peer's leaf certificate passes
// VerifyCertificate, and otherwise returns a *CertificateError, aborting
// the handshake before any application data is sent. Use it with
// InsecureSkipVerify: the evidence replaces CA-based verification.
func (v *Verifier) VerifyConnection(cs tls.ConnectionState) error {
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

// certCache keeps valid attested-TLS results per certificate (bounded,
// first-in-first-out).
type certCache struct {
	mu    sync.Mutex
	m     map[[32]byte]*Result
	order [][32]byte
}

const certCacheSize = 64

func (c *certCache) get(k [32]byte) (*Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[k]
	return r, ok
}

func (c *certCache) put(k [32]byte, r *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[[32]byte]*Result)
	}
	if _, ok := c.m[k]; ok {
		return
	}
	if len(c.order) >= certCacheSize {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[k] = r
	c.order = append(c.order, k)
}
