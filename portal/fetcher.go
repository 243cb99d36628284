package portal

import (
	"context"

	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/acds-project/acds"

	"github.com/acds-project/acds/mpctls/prover"
)

// ErrNotarization: the record was fetched but a notarized session could
// not be finalized (the notary refused or failed, or its statement did
// not check out). The fetch can be retried.
var ErrNotarization = errors.New("notarization failed")

// Transport is the HTTP transport of one fetch. Finish is called once,
// after the last exchange, whether the fetch succeeded or not: it closes
// the connections and returns one Session per TLS connection, in dial
// order, each with its Proof and, when the transport knows them, the
// request lines it carried (Host and Statement may be left to the
// Fetcher, which takes them from the Proof).
type Transport interface {
	http.RoundTripper
	Finish(ctx context.Context) ([]Session, error)
}

// TransportFactory makes the Transport of one fetch.
type TransportFactory func(ctx context.Context) (Transport, error)

// Notarized makes transports that send every exchange through the MPC-TLS
// prover and a notary: each fetch gets a fresh prover.Dialer, so each TLS
// connection is one notarized session and Finish returns all of them.
type Notarized struct {
	// Notary is the notary's host:port. Required.
	Notary string
	// NotaryKeys are the notary keys statements must be signed with.
	// Required.
	NotaryKeys []ed25519.PublicKey
	// TLSConfig is the base TLS configuration for the portals (RootCAs).
	// Nil means the system roots. See prover.Dialer.TLSConfig.
	TLSConfig *tls.Config
	// DialNotary connects to the notary. Nil means a plain TCP dial.
	DialNotary func(ctx context.Context, network, address string) (net.Conn, error)
	// Now is the clock statements are checked against. Nil means time.Now.
	Now func() time.Time
	// Guard is checked, through prover.Dialer.AllowAddr, against the
	// address the notary reports it dialled, before anything (the
	// credentials least of all) is sent to the portal: a notary whose own
	// rules are laxer (an external one run without a guard) cannot make
	// the service send them to a private address. The zero value is the
	// strict policy, as for the Connector; set AllowPrivate with the
	// Connector's.
	Guard Guard
}

// Factory returns a TransportFactory for n.
func (n Notarized) Factory() TransportFactory {
	return func(ctx context.Context) (Transport, error) {
		if n.Notary == "" || len(n.NotaryKeys) == 0 {
			return nil, &Error{Kind: ErrNotarization, Detail: "no notary or no trusted notary key configured"}
		}
		d := &prover.Dialer{Notary: n.Notary, NotaryKeys: n.NotaryKeys, TLSConfig: n.TLSConfig, DialNotary: n.DialNotary, Now: n.Now,
			AllowAddr: n.Guard.allowDialled}
		tr := &http.Transport{
			DialTLSContext: d.DialTLSContext,
			// Plain http cannot be notarized: refuse it rather than
			// letting it bypass the prover.
			DialContext: func(context.Context, string, string) (net.Conn, error) {
				return nil, &ForbiddenError{Target: "http", Reason: "plain http cannot be notarized"}
			},
			DisableCompression:    true,
			MaxIdleConnsPerHost:   1,
			ResponseHeaderTimeout: time.Minute,
		}
		return &notarizedTransport{Transport: tr, d: d, lines: map[string][]string{}}, nil
	}
}

type notarizedTransport struct {
	*http.Transport
	d *prover.Dialer

	mu    sync.Mutex
	lines map[string][]string // session id → the request lines sent in it, in order
}

// RoundTrip sends req, noting the session that carries it.
func (t *notarizedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	line := requestLine(req)
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		s := t.d.SessionOf(i.Conn)
		if s == nil {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.lines[s.ID()] = append(t.lines[s.ID()], line)
	}}
	return t.Transport.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}

// Finish closes the sessions' connections, finalizes the sessions and
// then closes the prover's control connections to the notary: the
// transport serves one fetch, and nothing of it stays open after. Each
// session comes with the request lines sent in it.
func (t *notarizedTransport) Finish(ctx context.Context) ([]Session, error) {
	t.CloseIdleConnections()
	defer t.d.CloseIdleConnections()
	proofs, err := t.d.FinalizeAll(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Session, len(proofs))
	for i, p := range proofs {
		out[i] = Session{Proof: p}
		if p != nil {
			out[i].RequestLines = slices.Clone(t.lines[p.SessionID])
		}
	}
	return out, nil
}

// Result is a record fetched through notarized TLS sessions.
type Result struct {
	FHIR []byte // the record: a collection Bundle
	Host string // the portal host
	// RequestLines are all FHIR API requests in order, the first being the
	// read of the portal's CapabilityStatement
	// ("GET /fhir/metadata HTTP/1.1").
	RequestLines []string
	// Sessions are the notarized TLS sessions, in dial order.
	Sessions []Session
	// Pages and Resources are as in Record.
	Pages, Resources int
	// Coverage is as in Record: what the record was assembled from.
	Coverage *acds.Coverage
}

// Session is one notarized TLS session of a fetch.
type Session struct {
	// Host is the server name of the session: the portal's host, or the
	// host a login redirected to.
	Host string
	// Statement is the notary's signed statement of the session.
	Statement []byte
	// RequestLines are the request lines sent in it, in order: FHIR API
	// requests, and the discovery, token and login requests of a SMART
	// login. Empty when the transport does not say.
	RequestLines []string
	// Proof is the prover's result, for presentations.
	Proof *prover.Result
}

// Fetcher fetches records through a fresh Transport per fetch and
// collects the notary statements. Fetch has the shape of the server's
// Fetcher seam, so a small adapter connects them.
type Fetcher struct {
	// Connector logs in and fetches; its zero value is the strict
	// production configuration.
	Connector Connector
	// NewTransport makes each fetch's transport, typically
	// Notarized{...}.Factory(). Required.
	NewTransport TransportFactory
	// FinishTimeout bounds the finalization of the notarized sessions
	// after the fetch. Zero means 30 s.
	FinishTimeout time.Duration
	// CheckHost, when set, is a rule the transport imposes on the
	// portal's host beyond the Connector's (for Notarized transports:
	// prover.CheckServerName, a DNS name). Admit and Fetch apply it, so
	// such a portal is refused before any connection.
	CheckHost func(host string) error
}

// Admit is Connector.Admit: whether req can be fetched at all, decided
// without network access by the rules Fetch applies first. The service
// calls it when a request arrives, so that a request bound to fail is
// refused then instead of being accepted and failed later.
func (f *Fetcher) Admit(req Request) error {
	return redactorFor(req).wrap(f.admit(req))
}

// admit is the Connector's admission, then the transport's host rule.
func (f *Fetcher) admit(req Request) error {
	if err := f.Connector.admit(req); err != nil {
		return err
	}
	if f.CheckHost == nil {
		return nil
	}
	u, err := url.Parse(req.PortalURL)
	if err != nil {
		return &ForbiddenError{Reason: "portalUrl is not a URL"} // unreachable: Connector.Admit refused it already
	}
	if err := f.CheckHost(u.Hostname()); err != nil {
		return &ForbiddenError{Target: u.Hostname(), Reason: "an IP address; a notarized portal needs a DNS name"}
	}
	return nil
}

// Fetch fetches req's record. The URL is checked before any connection;
// the Transport is finished (its sessions finalized or discarded) before
// Fetch returns, also on failure. Errors wrap the package's error classes
// and never contain the credentials.
func (f *Fetcher) Fetch(ctx context.Context, req Request) (*Result, error) {
	red := redactorFor(req)
	res, err := f.fetch(ctx, req, red)
	return res, red.wrap(err)
}

func (f *Fetcher) fetch(ctx context.Context, req Request, red redactor) (*Result, error) {
	if f.NewTransport == nil {
		return nil, &Error{Kind: ErrNotarization, Detail: "no transport factory"}
	}
	if err := f.admit(req); err != nil {
		return nil, err // before any transport: nothing to finalize
	}
	tr, err := f.NewTransport(ctx)
	if err != nil {
		return nil, &Error{Kind: ErrNotarization, Op: "transport", Err: safeCause(err)}
	}
	rec, ferr := f.Connector.fetch(ctx, &http.Client{Transport: tr}, req, red)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), orDuration(f.FinishTimeout, 30*time.Second))
	defer cancel()
	sessions, nerr := tr.Finish(fctx)
	if ferr != nil {
		return nil, ferr
	}
	if nerr != nil {
		return nil, &Error{Kind: ErrNotarization, Op: "finalize", Err: safeCause(nerr)}
	}
	if len(sessions) == 0 {
		return nil, &Error{Kind: ErrNotarization, Op: "finalize", Detail: "no notarized session"}
	}
	for i := range sessions {
		ss := &sessions[i]
		if ss.Proof == nil {
			return nil, &Error{Kind: ErrNotarization, Op: "finalize", Detail: "a session without a proof"}
		}
		if ss.Statement == nil {
			ss.Statement = ss.Proof.Statement
		}
		if ss.Host == "" {
			ss.Host = ss.Proof.Host
		}
		if ss.Host == "" {
			ss.Host = rec.Host
		}
	}
	return &Result{FHIR: rec.FHIR, Host: rec.Host, RequestLines: rec.RequestLines, Sessions: sessions,
		Pages: rec.Pages, Resources: rec.Resources, Coverage: rec.Coverage}, nil
}

// String describes the result without its data.
func (r *Result) String() string {
	return fmt.Sprintf("%d bytes of FHIR from %s in %d pages over %d notarized sessions", len(r.FHIR), r.Host, r.Pages, len(r.Sessions))
}
