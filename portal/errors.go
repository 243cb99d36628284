package portal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/acds-project/acds"
)

// Error classes. Every error of a connector or of Fetcher.Fetch wraps
// exactly one of them; ProblemCode maps them to the wire's problem codes
// and ProblemField to the request field at fault.
var (
	// ErrAuthFailed: the portal refused the credentials (wrong password,
	// unknown user, locked account, refused consent).
	ErrAuthFailed = errors.New("portal login failed")
	// ErrAccountLocked is the locked-account case of ErrAuthFailed; an
	// error wrapping it also wraps ErrAuthFailed.
	ErrAccountLocked = errors.New("portal account locked")
	// ErrMFARequired: the portal wants a second factor that the service
	// cannot supply.
	ErrMFARequired = errors.New("portal requires multi-factor authentication")
	// ErrUnavailable: the portal could not be reached or kept failing
	// (5xx, 429, timeouts) after the bounded retries.
	ErrUnavailable = errors.New("portal unavailable")
	// ErrRecordNotFound: the portal has no record with that id, or none
	// the credentials can read.
	ErrRecordNotFound = errors.New("record not found")
	// ErrResponseInvalid: the portal answered something that is not the
	// FHIR it should be (malformed JSON, wrong resource type, truncated
	// page, broken paging) or exceeded the size and page limits.
	ErrResponseInvalid = errors.New("portal response invalid")
	// ErrLimit is the limit case of ErrResponseInvalid: the record is
	// larger, or has more pages, than the configured limits.
	ErrLimit = errors.New("portal record exceeds the fetch limits")
	// ErrUnsupported: the portal cannot serve this systemType with the
	// operator's registration — its discovery document omits the password
	// grant, the authorization code flow or PKCE S256, it refuses the
	// registration's client, grant or scopes (unauthorized_client,
	// invalid_client, unsupported_grant_type, invalid_scope), no client
	// authentication method both sides have, or a login page that only a
	// browser can drive (a script-built page, an identity-provider chooser
	// with no single password login).
	ErrUnsupported = errors.New("portal unsupported as registered")
	// ErrForbidden: the portal URL or the address it resolves to is
	// refused by the Guard.
	ErrForbidden = errors.New("forbidden portal")
	// ErrUnsupportedSystemType: the systemType is not one of acds.SystemTypes.
	ErrUnsupportedSystemType = errors.New("unsupported system type")
	// ErrInvalidRequest: the request lacks a field or has a malformed one.
	ErrInvalidRequest = errors.New("invalid portal request")
	// ErrMalformedURL: a URL is not an absolute URL with a host, a valid
	// port and no user information. An error wrapping it from Admit also
	// wraps ErrInvalidRequest (the caller's portalUrl is at fault); from a
	// fetch, where the portal published the URL, ErrResponseInvalid.
	ErrMalformedURL = errors.New("malformed URL")
)

// ProblemCode returns the wire's problem code (one of the acds.Problem*
// constants, which are the only declaration of them) for an error
// returned by this package, and acds.ProblemInternal for any other error
// (including nil). It is the one mapping of portal errors to problem
// codes: the server answers and fails requests with it.
func ProblemCode(err error) string {
	switch {
	case err == nil:
		return acds.ProblemInternal
	case errors.Is(err, ErrForbidden):
		return acds.ProblemForbiddenPortal
	case errors.Is(err, ErrMFARequired):
		return acds.ProblemPortalMFARequired
	case errors.Is(err, ErrAuthFailed):
		return acds.ProblemPortalAuthFailed
	case errors.Is(err, ErrRecordNotFound):
		return acds.ProblemRecordNotFound
	case errors.Is(err, ErrUnsupported):
		return acds.ProblemPortalUnsupported
	case errors.Is(err, ErrResponseInvalid):
		return acds.ProblemPortalResponseInvalid
	case errors.Is(err, ErrUnavailable):
		return acds.ProblemPortalUnavailable
	case errors.Is(err, ErrUnsupportedSystemType):
		return acds.ProblemUnsupportedSystemType
	case errors.Is(err, ErrInvalidRequest):
		return acds.ProblemInvalidRequest
	case errors.Is(err, ErrNotarization):
		return acds.ProblemUnavailable
	default:
		return acds.ProblemInternal
	}
}

// ProblemField returns the request field an error of Admit is about,
// for the problem's field errors: "portalUrl" for ErrForbidden and
// ErrMalformedURL, "recordId"
// for ErrInvalidRecordID and ErrRecordIDRequired, "systemType" for ErrUnsupportedSystemType,
// "username" and "password" for ErrInvalidUsername and ErrInvalidPassword,
// and "" for any other error.
func ProblemField(err error) string {
	switch {
	case errors.Is(err, ErrForbidden), errors.Is(err, ErrMalformedURL):
		return "portalUrl"
	case errors.Is(err, ErrInvalidRecordID), errors.Is(err, ErrRecordIDRequired):
		return "recordId"
	case errors.Is(err, ErrUnsupportedSystemType):
		return "systemType"
	case errors.Is(err, ErrInvalidUsername):
		return "username"
	case errors.Is(err, ErrInvalidPassword):
		return "password"
	}
	return ""
}

// Error is a failed exchange with a portal. It wraps one of the error
// classes (Kind) and, when there is one, the underlying cause. Its text
// never contains credentials: portal answers quoted in Detail are capped
// and have the credentials of the request blanked out.
type Error struct {
	Kind   error  // one of the Err* classes of this package
	Op     string // what was being done, e.g. "password grant", "GET Patient/7/$everything"
	Status int    // HTTP status of the portal's answer; 0 when there was none
	Detail string // a capped, redacted excerpt of the portal's explanation
	Err    error  // the cause, when there is one
}

// Error renders "portal: <op>: <class> (HTTP <status>): <detail>: <cause>",
// leaving out the parts that are empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("portal: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(e.Kind.Error())
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the class and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// ForbiddenError says why the Guard refused a portal URL or address.
type ForbiddenError struct {
	Target string // the URL host or dialled address that was refused
	Reason string // e.g. "loopback address", "scheme http is not allowed"

	dialled bool // refused by Control: Target is a resolved address
}

// Error renders "forbidden portal <target>: <reason>".
func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("forbidden portal %s: %s", e.Target, e.Reason)
}

// Unwrap returns ErrForbidden.
func (e *ForbiddenError) Unwrap() error { return ErrForbidden }

// URLError says why a URL is malformed (see Guard.CheckURL). It never
// quotes the URL, which may carry a password in its user information.
type URLError struct {
	Reason string // e.g. "not a URL", "no host", "user information"
}

// Error renders "malformed URL: <reason>".
func (e *URLError) Error() string { return "malformed URL: " + e.Reason }

// Unwrap returns ErrMalformedURL.
func (e *URLError) Unwrap() error { return ErrMalformedURL }

// maxDetail caps the portal text quoted in an Error.
const maxDetail = 200

// redactor blanks out secrets in text that is about to become part of an
// error. It is the package's one redaction: every public entry point
// that takes a Request (Connector.Admit and Fetch, Fetcher.Admit and
// Fetch) makes one with redactorFor and wraps its error with it exactly
// once, on the way out; inside, a session's copy blanks out the portal
// text quoted in Details, and also holds the access token and the
// authorization code once the flow learns them. (The server redacts the credentials out of a Fetcher's
// errors again, defensively, because its Fetcher need not be this
// package's.)
type redactor []string

// redactorFor is the redactor of req's credentials, also in the HTTP
// Basic form fhir-basic sends them in, which a portal could echo.
func redactorFor(req Request) redactor {
	c := req.Credentials
	return newRedactor(c.Username, c.Password, base64.StdEncoding.EncodeToString([]byte(c.Username+":"+c.Password)))
}

// Redact returns msg with every secret of three characters or more
// replaced by "[redacted]" (shorter ones would blank out ordinary text).
// It is the one redaction rule: the portal applies it to every error its
// Connector and Fetcher return, and the server to the errors of any
// Fetcher, including an embedder's own.
func Redact(msg string, secrets ...string) string { return newRedactor(secrets...).apply(msg) }

func newRedactor(secrets ...string) redactor {
	var r redactor
	for _, s := range secrets {
		if len(s) >= 3 { // shorter strings would blank out ordinary text
			r = append(r, s)
		}
	}
	return r
}

func (r redactor) apply(s string) string {
	for _, secret := range r {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}

// detail turns portal text into a capped, redacted one-line Detail.
func (r redactor) detail(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = r.apply(s)
	if len(s) > maxDetail {
		s = s[:maxDetail] + "…"
	}
	return r.apply(s) // the cut cannot create a secret, but be certain
}

// redactedError keeps an error's classes for errors.Is while its text has
// the secrets blanked out.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// wrap returns err with the secrets blanked out of its text; nil stays nil.
func (r redactor) wrap(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := r.apply(msg)
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// netError is a failure to reach a portal (or the notary), described by
// what happened — the name does not resolve, the connection was refused,
// the TLS handshake failed — and never by the service's own resolver,
// addresses or network: the text of a *net.DNSError names the resolver
// ("lookup h on 10.0.0.2:53: no such host") and that of a *net.OpError
// the local and remote addresses, and an error's text reaches the caller
// as a problem detail. The cause stays reachable through Unwrap, for
// errors.Is (context.DeadlineExceeded, syscall.ECONNREFUSED …) and for
// the operator's own logs.
type netError struct {
	msg   string
	cause error
}

func (e *netError) Error() string { return e.msg }
func (e *netError) Unwrap() error { return e.cause }

// unreachable is the ErrUnavailable error of a failure to reach host.
func unreachable(op, host string, err error) *Error {
	return &Error{Kind: ErrUnavailable, Op: op, Err: &netError{msg: host + ": " + netFailure(err), cause: err}}
}

// safeCause is err as a cause that may be quoted: its own text when that
// names no address and no resolver, else the kind of failure it is.
func safeCause(err error) error {
	if err == nil {
		return nil
	}
	return &netError{msg: netFailure(err), cause: err}
}

// netFailure says what kind of network failure err is, in words that name
// no address, resolver or network of the service.
func netFailure(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		switch {
		case dns.IsNotFound:
			return "the name does not resolve"
		case dns.IsTimeout:
			return "resolving the name timed out"
		}
		return "resolving the name failed"
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no route to the host"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the connection closed early"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	// TLS failures name the certificate the portal presented and the
	// portal's name, which the caller may see.
	var (
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
		ae tls.AlertError
		rh tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &cv):
		return cv.Error()
	case errors.As(err, &ua):
		return "TLS: " + ua.Error()
	case errors.As(err, &he):
		return "TLS: " + he.Error()
	case errors.As(err, &ci):
		return "TLS: " + ci.Error()
	case errors.As(err, &ae):
		return "TLS: " + ae.Error()
	case errors.As(err, &rh):
		return "TLS: " + rh.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is the portal's, and said elsewhere
	}
	var op *net.OpError
	msg := err.Error()
	if errors.As(err, &op) || strings.Contains(msg, "lookup ") || namesAddress(msg) {
		return "the connection failed"
	}
	return msg
}

// namesAddress reports whether s contains an IP address, with or without
// a port.
func namesAddress(s string) bool {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '.' || r == ':' || r == '[' || r == ']' || r == '%')
	}) {
		f = strings.TrimRight(f, ".:")
		if _, err := netip.ParseAddrPort(f); err == nil {
			return true
		}
		if _, err := netip.ParseAddr(strings.Trim(f, "[]")); err == nil {
			return true
		}
	}
	return false
}
