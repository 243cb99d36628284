package attestedtls

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/acds-project/acds/attestation"
)

// Options configure [NewCertificates]. The zero value is useful.
type Options struct {
	// Hosts are extra DNS names or IP addresses for the certificate's
	// subject alternative names ("localhost", 127.0.0.1 and ::1 are always
	// included). Zero value: none.
	Hosts []string
	// Validity is each certificate's lifetime. Zero value: 30 days.
	Validity time.Duration
	// Now is the clock that decides when to reissue; it must agree with
	// the enclave's (attestation.Options.Now). Zero value: time.Now.
	Now func() time.Time
	// Issuer is the operator CA that issues the certificates (see
	// attestation.Issuer): they are still for the enclave's TLS key and
	// still carry the boot evidence, and clients that trust the CA also
	// check the chain and host name. A certificate never outlives the CA
	// certificate. Zero value: self-signed certificates.
	Issuer *attestation.Issuer
}

// Certificates serves an enclave's attested TLS certificate to a TLS
// server: the certificate's key is the TLS key the boot quote binds, and it
// carries the boot evidence (see attestation.(*Enclave).TLSCertificate),
// self-signed or issued by an operator CA (Options.Issuer). It reissues the
// certificate for the same key when less than a third of its validity is
// left, so a long-running server never serves an expired one; a restart is
// a new boot and rotates key, evidence and certificate. It is safe for
// concurrent use.
type Certificates struct {
	e        *attestation.Enclave
	hosts    []string
	validity time.Duration
	now      func() time.Time
	issuer   *attestation.Issuer

	mu    sync.Mutex
	cert  *tls.Certificate
	retry time.Time // no reissue before this, after one that failed or gained nothing
}

// NewCertificates issues the first certificate of e, which must have been
// started with attestation.Options.TLS (else attestation.ErrNoTLSKey). With
// Options.Issuer, errors wrap attestation.ErrIssuer when the CA cannot issue
// (for example it is not valid now).
func NewCertificates(e *attestation.Enclave, o Options) (*Certificates, error) {
	if o.Validity <= 0 {
		o.Validity = 30 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Certificates{e: e, hosts: append([]string(nil), o.Hosts...), validity: o.Validity, now: o.Now, issuer: o.Issuer}
	if _, err := c.GetCertificate(nil); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCertificate is a tls.Config.GetCertificate: it returns the current
// certificate, reissuing it first when it is in the last third of its
// validity. When reissuing fails, or gains nothing because the operator
// CA's certificate ends first, the current certificate is served while it
// is still valid, and reissuing is retried only after a thirtieth of the
// validity, so handshakes do not each pay for a signature.
func (c *Certificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.cert != nil && (c.cert.Leaf.NotAfter.Sub(now) > c.validity/3 || now.Before(c.retry) && now.Before(c.cert.Leaf.NotAfter)) {
		return c.cert, nil
	}
	next, err := c.e.IssuedTLSCertificate(c.issuer, c.validity, c.hosts...)
	if err != nil {
		if c.cert != nil && now.Before(c.cert.Leaf.NotAfter) {
			c.retry = now.Add(c.validity / 30)
			return c.cert, nil
		}
		return nil, fmt.Errorf("attested TLS certificate: %w", err)
	}
	if c.cert != nil && !next.Leaf.NotAfter.After(c.cert.Leaf.NotAfter) {
		// Capped by the CA certificate: no better than the current one.
		c.retry = now.Add(c.validity / 30)
		if now.Before(c.cert.Leaf.NotAfter) {
			return c.cert, nil
		}
	}
	c.cert = &next
	return c.cert, nil
}

// TLSConfig returns a server configuration (TLS 1.2 or later) serving c's
// certificates.
func (c *Certificates) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: c.GetCertificate, MinVersion: tls.VersionTLS12}
}

// ListenHosts returns the host of a listen address ("HOST:PORT") for
// Options.Hosts, or none when it is empty or unspecified (0.0.0.0, ::).
func ListenHosts(addr string) ([]string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errors.New("attested TLS: listen address is not HOST:PORT")
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return nil, nil
	}
	return []string{host}, nil
}
