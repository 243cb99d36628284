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
// Verified evidence is cached per certificate key: only the first
// connection to an enclave pays for verifying its quote (concurrent first
// handshakes wait for one verification); later connections (new TCP and
// TLS each) cost a hash, a map lookup and the validity windows of the
// certificate and the policy's manifest, checked at the policy's clock on
// every connection. A certificate renewed for the same enclave key with the
// same evidence is a cache hit; any other change (another key, other
// evidence bytes, a certificate not valid at the clock) is verified afresh.
//
// This package is the glue between package client, which knows nothing
// of verification, and package verify, which never touches the network:
// client.NewAttested takes any tls.ConnectionState check, and
// [Checker.VerifyConnection] is the one for ACDS enclaves. Use
// [Checker.TLSConfig] for raw TLS connections and [Checker.Transport] for
// other HTTP clients.
package attested

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/verify"
)

// Options configure a Checker. The zero value (or nil) is useful.
type Options struct {
	// CacheSize bounds how many verified enclave keys are remembered
	// (first in, first out). Zero value: 64; negative: no cache (every
	// connection verifies the evidence).
	CacheSize int
}

// Stats count what a Checker did.
type Stats struct {
	// Verified counts evidence verifications (cache misses), whether they
	// passed or not.
	Verified uint64
	// Cached counts connections accepted from the cache.
	Cached uint64
	// Refused counts connections refused.
	Refused uint64
}

// Checker is the attested-TLS peer check of one policy. It is safe for
// concurrent use; share one among clients to share its cache.
type Checker struct {
	v        *verify.Verifier
	now      func() time.Time
	manifest *manifest.Manifest
	size     int

	mu       sync.Mutex
	cache    map[[32]byte]entry // by SHA-256 of the certificate's SubjectPublicKeyInfo
	order    [][32]byte
	inflight map[cacheKey]*flight

	verified, cached, refused atomic.Uint64
}

type cacheKey struct {
	key, evidence [32]byte // SHA-256 of the SubjectPublicKeyInfo and of the evidence extension
}

// flight is one verification in progress; done is closed when it ends.
type flight struct{ done chan struct{} }

type entry struct {
	evidence [32]byte // SHA-256 of the evidence extension's bytes
	result   *verify.Result
}

// NewChecker returns a Checker accepting the enclaves that policy p
// accepts, or verify.New's *verify.PolicyError for a contradictory or
// empty policy. p's clock also decides the validity of certificates and of
// the manifest on cache hits.
func NewChecker(p verify.Policy, opts *Options) (*Checker, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CacheSize == 0 {
		o.CacheSize = 64
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	v, err := verify.New(p)
	if err != nil {
		return nil, err
	}
	return &Checker{v: v, now: p.Now, manifest: p.Manifest, size: o.CacheSize,
		cache: map[[32]byte]entry{}, inflight: map[cacheKey]*flight{}}, nil
}

// VerifyConnection is a tls.Config.VerifyConnection: it accepts the
// handshake only when the peer's leaf certificate passes
// verify.(*Verifier).VerifyCertificate (evidence valid under the policy,
// certificate valid at the clock, its key the TLS key the evidence binds),
// or when the same key with the same evidence passed before and the
// certificate (and the policy's manifest) are valid at the clock. Otherwise it returns a
// *verify.CertificateError. It does not check the certificate's issuer or
// names; see [Checker.TLSConfig].
func (c *Checker) VerifyConnection(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		c.refused.Add(1)
		return c.v.VerifyConnection(cs) // the typed "no evidence" refusal
	}
	leaf := cs.PeerCertificates[0]
	if c.manifest != nil {
		// Checked on every connection: a cached acceptance must not outlive
		// the manifest that allowed it.
		if err := c.manifest.ValidAt(c.now()); err != nil {
			c.refused.Add(1)
			return &verify.CertificateError{Result: &verify.Result{VerifiedAt: c.now(), Failures: []*verify.Failure{
				{Check: verify.CheckManifest, Err: fmt.Errorf("%w: %w", verify.ErrManifest, err)}}}}
		}
	}
	if c.size <= 0 {
		return c.verify(leaf, cacheKey{}, false)
	}
	k := cacheKey{key: sha256.Sum256(leaf.RawSubjectPublicKeyInfo), evidence: sha256.Sum256(attestation.BootEvidenceFromCertificate(leaf))}
	for waited := false; ; waited = true {
		c.mu.Lock()
		e, hit := c.cache[k.key]
		if hit && e.evidence == k.evidence {
			c.mu.Unlock()
			if now := c.now(); !now.Before(leaf.NotBefore) && !now.After(leaf.NotAfter) {
				c.cached.Add(1)
				return nil
			}
			return c.verify(leaf, k, false) // says why the certificate is not valid now
		}
		f, inFlight := c.inflight[k]
		if waited || !inFlight {
			// Lead: verify while concurrent handshakes with the same key
			// and evidence wait, so that only one of them pays. (After
			// waiting for a leader that failed, verify without leading.)
			lead := !inFlight
			if lead {
				f = &flight{done: make(chan struct{})}
				c.inflight[k] = f
			}
			c.mu.Unlock()
			err := c.verify(leaf, k, true)
			if lead {
				c.mu.Lock()
				delete(c.inflight, k)
				c.mu.Unlock()
				close(f.done)
			}
			return err
		}
		c.mu.Unlock()
		<-f.done
	}
}

// verify runs the full check and, when store is set and it passes,
// caches the result under k.
func (c *Checker) verify(leaf *x509.Certificate, k cacheKey, store bool) error {
	c.verified.Add(1)
	r := c.v.VerifyCertificate(leaf)
	if !r.Valid {
		c.refused.Add(1)
		return &verify.CertificateError{Result: r}
	}
	if store {
		c.put(k.key, entry{evidence: k.evidence, result: r})
	}
	return nil
}

func (c *Checker) put(k [32]byte, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cache[k]; !ok {
		if len(c.order) >= c.size {
			delete(c.cache, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, k)
	}
	c.cache[k] = e
}

// Result returns the verification result that admitted cert (by its key
// and evidence), or nil when c has not accepted it. Call it after a
// connection (for example with http.Response.TLS.PeerCertificates[0]) to
// learn the enclave's profile and measurement. The Result is shared and
// must not be modified.
func (c *Checker) Result(cert *x509.Certificate) *verify.Result {
	key := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	ev := sha256.Sum256(attestation.BootEvidenceFromCertificate(cert))
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache[key]; ok && e.evidence == ev {
		return e.result
	}
	return nil
}

// Stats returns the counts so far.
func (c *Checker) Stats() Stats {
	return Stats{Verified: c.verified.Load(), Cached: c.cached.Load(), Refused: c.refused.Load()}
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
