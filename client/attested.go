package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Errors of attested-TLS configuration.
var (
	// ErrAttestedNeedsHTTPS: attested TLS was asked for a base URL or a
	// redirect that is not https, where no handshake could check the peer.
	ErrAttestedNeedsHTTPS = errors.New("client: attested TLS needs https")
	// ErrAttestedTransport: the HTTP client's transport cannot carry the
	// peer check (it is not an *http.Transport, or it dials TLS itself).
	ErrAttestedTransport = errors.New("client: attested TLS needs an *http.Transport that does its own TLS")
	// ErrAttestedNoCheck: no peer check was given.
	ErrAttestedNoCheck = errors.New("client: attested TLS needs a peer check")
)

// NewAttested returns a client for baseURL (https only) that sends nothing
// to a server unless check accepts it during the TLS handshake.
//
// check is a tls.Config.VerifyConnection function: it sees the server's
// certificates and returns nil to accept. Returning an error aborts the
// handshake before any byte of the request is written, and every method of
// the client then returns an error that wraps check's error unchanged
// (errors.As reaches it through the client's wrapping). Package
// client/attested provides the check that verifies an ACDS enclave's boot
// evidence with package verify; this package stays free of verification
// code so that plain clients do not carry it.
//
// The check replaces CA-based verification: certificates of an attested
// enclave are self-signed and trusted through the evidence they carry. When
// opts.HTTPClient has an *http.Transport whose TLSClientConfig sets
// RootCAs (an operator CA), the CA chain and host name are verified too,
// before check runs. Redirects are followed only to https URLs, through
// the same checked transport. See [AttestedTransport] for the transport
// rules.
func NewAttested(baseURL string, check func(tls.ConnectionState) error, opts *Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "https" {
		return nil, fmt.Errorf("%w: base URL %q", ErrAttestedNeedsHTTPS, redactURL(baseURL))
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	var hc http.Client
	var base *http.Transport
	if o.HTTPClient != nil {
		hc = *o.HTTPClient
		if hc.Transport != nil {
			t, ok := hc.Transport.(*http.Transport)
			if !ok {
				return nil, fmt.Errorf("%w: got %T", ErrAttestedTransport, hc.Transport)
			}
			base = t
		}
	} else {
		hc.Timeout = defaultAttemptTimeout
	}
	t, err := AttestedTransport(base, check)
	if err != nil {
		return nil, err
	}
	hc.Transport = t
	next := hc.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return fmt.Errorf("%w: redirect to %s", ErrAttestedNeedsHTTPS, req.URL.Redacted())
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("client: stopped after 10 redirects")
		}
		return nil
	}
	o.HTTPClient = &hc
	return New(baseURL, &o)
}

// defaultAttemptTimeout is New's overall timeout per attempt when the
// caller supplies no HTTP client.
const defaultAttemptTimeout = 2 * time.Minute

// AttestedTransport returns a copy of base (nil: a copy of
// http.DefaultTransport) whose TLS handshakes accept a server only when
// check does (see [NewAttested]). It refuses a base that dials TLS itself
// (DialTLS or DialTLSContext set), since its handshakes would skip the
// check. Connections through a proxy still run TLS end to end with the
// server (HTTP CONNECT), so the check sees the server's own certificate.
//
// The returned transport never sends a request over a connection that
// check has not accepted; TLS session resumption, when configured, runs
// check again on the resumed connection, as crypto/tls does.
func AttestedTransport(base *http.Transport, check func(tls.ConnectionState) error) (*http.Transport, error) {
	if check == nil {
		return nil, ErrAttestedNoCheck
	}
	if base == nil {
		dt, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("%w: http.DefaultTransport is %T", ErrAttestedTransport, http.DefaultTransport)
		}
		base = dt
	}
	// DialTLS is deprecated but still honoured by net/http: refuse it too.
	if base.DialTLSContext != nil || base.DialTLS != nil {
		return nil, fmt.Errorf("%w: it sets DialTLS or DialTLSContext", ErrAttestedTransport)
	}
	t := base.Clone()
	var cfg *tls.Config
	if t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.MinVersion < tls.VersionTLS12 {
		cfg.MinVersion = tls.VersionTLS12
	}
	// Without an operator CA, the evidence alone authenticates the server:
	// crypto/tls still proves that the server holds the certificate's key.
	cfg.InsecureSkipVerify = cfg.RootCAs == nil
	prev := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		return check(cs)
	}
	t.TLSClientConfig = cfg
	return t, nil
}

// redactURL drops user information from a URL for an error message.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…" + s[i:]
	}
	return s
}
