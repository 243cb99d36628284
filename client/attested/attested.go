// Package attested connects ACDS clients to attested enclaves only: before
// a client sends a byte of a request (and so before any bearer token or
// portal credential leaves the caller), the TLS handshake must show that
// the server is a genuine enclave running a published code hash.
//
// The server's certificate carries the enclave's boot evidence in an X.509
// extension (attestation.OIDBootEvidence). A [Checker] verifies it offline
// with package verify, under the caller's [verify.Policy]: the vendor
// chain and report signature, the measurement against the manifest,
// simulation only when the policy allows it, and that the certificate's
// key is the TLS key the quote binds. A server that fails any of these
// never receives the request: the handshake aborts with a
// *verify.CertificateError whose Result lists each failed check
// (verify.Failure.Check) with its typed error (errors.Is with verify.Err*).
//
//	m, _ := manifest.Verify(signedManifest, publisherKey, time.Now())
//	ch, err := attested.NewChecker(verify.Policy{Manifest: m}, nil)
//	c, err := ch.Client("https://acds.example.org", nil)
//	sess, err := c.Anon(ctx, "") // sent only to an attested enclave
//	var ce *verify.CertificateError
//	if errors.As(err, &ce) { fmt.Println(ce.Result.Reasons()) }
//
// Verified evidence is cached once, by the Checker's verify.Verifier, keyed
// by the evidence bytes: only the first connection to an enclave pays for
// verifying its quote (concurrent first handshakes wait for one
// verification); later connections (new TCP and TLS each) cost parsing the
// evidence, two hashes, a map lookup, the binding of the certificate's key
// and the validity windows of the certificate and the policy's manifest,
// checked at the policy's clock on every connection. A certificate renewed
// for the same enclave key with the same evidence is a cache hit; the same
// evidence under another key is a hit that fails the key binding; other
// evidence bytes are verified afresh.
//
// This package is the glue between package client, which knows nothing
// of verification, and package verify, which never touches the network:
// client.NewAttested takes any tls.ConnectionState check, and
// [Checker.VerifyConnection] is the one for ACDS enclaves. Use
// [Checker.TLSConfig] for raw TLS connections and [Checker.Transport] for
// other HTTP clients.
package attested

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync/atomic"

	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/verify"
)

// Options configure a Checker. The zero value (or nil) is useful.
type Options struct {
	// CacheSize, when not zero, replaces the policy's CacheSize: how many
	// verified pieces of evidence the Checker's verifier remembers (first
	// in, first out; negative: none, every connection verifies the
	// evidence). Zero value: the policy's (verify.DefaultCacheSize when
	// that is zero too).
	CacheSize int
}

// Stats count what a Checker did.
type Stats struct {
	// Verified counts evidence verifications (cache misses of the
	// Checker's verifier), whether they passed or not.
	Verified uint64
	// Cached counts evidence checks the verifier's cache answered.
	Cached uint64
	// Refused counts connections refused.
	Refused uint64
}

// Checker is the attested-TLS peer check of one policy. It is safe for
// concurrent use; share one among clients to share its verifier's cache.
type Checker struct {
	v       *verify.Verifier
	refused atomic.Uint64
}

// NewChecker returns a Checker accepting the enclaves that policy p
// accepts, or verify.New's *verify.PolicyError for a contradictory or
// empty policy. p's clock decides the validity of evidence, certificates
// and the manifest on every connection.
func NewChecker(p verify.Policy, opts *Options) (*Checker, error) {
	if opts != nil && opts.CacheSize != 0 {
		p.CacheSize = opts.CacheSize
	}
	v, err := verify.New(p)
	if err != nil {
		return nil, err
	}
	return &Checker{v: v}, nil
}

// VerifyConnection is a tls.Config.VerifyConnection: it accepts the
// handshake only when the peer's leaf certificate passes
// verify.(*Verifier).VerifyCertificate (evidence valid under the policy,
// manifest valid, certificate valid at the clock, its key the TLS key the
// evidence binds). Otherwise it returns a *verify.CertificateError. It does
// not check the certificate's issuer or names; see [Checker.TLSConfig].
func (c *Checker) VerifyConnection(cs tls.ConnectionState) error {
	err := c.v.VerifyConnection(cs)
	if err != nil {
		c.refused.Add(1)
	}
	return err
}

// Result returns the verification result of cert under c's policy (for
// example with http.Response.TLS.PeerCertificates[0] after a connection, to
// learn the enclave's profile and measurement), or nil when cert does not
// pass. For a certificate c accepted before, it comes from the cache.
func (c *Checker) Result(cert *x509.Certificate) *verify.Result {
	if r := c.v.VerifyCertificate(cert); r.Valid {
		return r
	}
	return nil
}

// Stats returns the counts so far.
func (c *Checker) Stats() Stats {
	s := c.v.Stats()
	return Stats{Verified: s.Verified, Cached: s.Cached, Refused: c.refused.Load()}
}

// TLSConfig returns a TLS client configuration (TLS 1.2 or later) for
// serverName that accepts only attested enclaves: CA verification is off
// (InsecureSkipVerify; the evidence, not a CA, says whose key it is) and
// VerifyConnection is c's. crypto/tls still proves that the server holds
// the certificate's key.
func (c *Checker) TLSConfig(serverName string) *tls.Config {
	return &tls.Config{
		ServerName:         serverName,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true,
		VerifyConnection:   c.VerifyConnection,
	}
}

// Transport returns a copy of base (nil: http.DefaultTransport) whose TLS
// connections are checked by c; see client.AttestedTransport for the rules
// and errors.
func (c *Checker) Transport(base *http.Transport) (*http.Transport, error) {
	return client.AttestedTransport(base, c.VerifyConnection)
}

// Client returns an ACDS API client for baseURL (https only) that talks
// only to enclaves c accepts; see client.NewAttested for opts and errors.
// Every call's error wraps the *verify.CertificateError of a refused
// server.
func (c *Checker) Client(baseURL string, opts *client.Options) (*client.Client, error) {
	return client.NewAttested(baseURL, c.VerifyConnection, opts)
}
