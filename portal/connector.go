package portal

import (
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acds-project/acds"
)

// Credentials are a portal login. They print, marshal and log as a
// placeholder (String, GoString, MarshalJSON, LogValue), so a Request in
// a log line, an error or a JSON document carries no secret.
type Credentials struct {
	Username string
	Password string
}

// String returns a placeholder, never the credentials.
func (Credentials) String() string { return "[credentials redacted]" }

// GoString returns a placeholder, never the credentials.
func (Credentials) GoString() string { return "portal.Credentials{[redacted]}" }

// MarshalJSON encodes a placeholder, never the credentials, so a Request
// logged or stored as JSON carries no secret.
func (Credentials) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// LogValue makes log/slog print a placeholder, never the credentials.
func (Credentials) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Request is one record to fetch.
type Request struct {
	SystemType  string      // one of acds.SystemTypes
	PortalURL   string      // the FHIR base URL, e.g. https://portal.example/fhir
	RecordID    string      // the Patient id; empty means the token's patient context (smart-* and demo only)
	Credentials Credentials // the login
}

// The public SMART client the connector uses for a portal origin without
// a Registration: the client the bundled demo portal (`acds portal`,
// `acds demo`) registers.
const (
	DemoClientID    = "acds-demo"
	DemoRedirectURI = "https://acds.invalid/smart/callback"
)

// Registration is the SMART client registration the operator configured
// for a portal origin (Connector.Registrations). It prints, logs and
// marshals without its Key or ClientSecret (String, GoString, LogValue,
// MarshalJSON).
type Registration struct {
	ClientID    string // required
	RedirectURI string // required; the connector intercepts the redirect and never dials it
	// Scope is the scopes the client asks for, separated by spaces; empty
	// means DefaultScope. The connector asks for those the portal lists
	// in scopes_supported, in their SMART v2 form where the portal
	// advertises permission-v2.
	Scope string
	// Key, when set, authenticates the client at the token endpoint with
	// private_key_jwt (RFC 7523): ECDSA P-256 (ES256), P-384 (ES384) or
	// RSA ≥ 2048 bits (RS384). Nil (and no ClientSecret) means a public
	// client.
	Key crypto.Signer
	// KeyID is the "kid" of Key's JWS header, when the portal wants one.
	KeyID string
	// ClientSecret, when set, authenticates a confidential client at the
	// token endpoint with client_secret_basic or, where the portal lists
	// only that (or AuthMethod says so), client_secret_post. A
	// registration has a Key or a ClientSecret, not both.
	ClientSecret string
	// AuthMethod is the token_endpoint_auth_method the client is
	// registered with at the portal (RFC 7591), when it must be one: with
	// a ClientSecret "client_secret_basic" or "client_secret_post", with
	// a Key "private_key_jwt", with neither "none". Empty lets the
	// portal's token_endpoint_auth_methods_supported choose.
	AuthMethod string
}

// Record is a fetched patient record.
type Record struct {
	// FHIR is a collection Bundle of every resource fetched, each once.
	FHIR []byte
	// Host is the portal host name (without port).
	Host string
	// RequestLines are the FHIR API requests made, in order, as HTTP/1.1
	// request lines ("GET /fhir/Patient/7/$everything HTTP/1.1").
	RequestLines []string
	// Pages is the number of FHIR API responses read.
	Pages int
	// Resources is the number of resources in FHIR.
	Resources int
	// Coverage says what the record was assembled from: $everything or
	// the compartment's searches, every FHIR API request with its status,
	// pages and entries, and the compartment types the portal does not
	// search.
	Coverage *acds.Coverage
}

// Connector logs in to clinical portals and fetches patient records over
// the *http.Client it is given, whose transport decides how the portal is
// reached (the MPC-TLS prover in production). Every zero field has a
// documented, usable default.
type Connector struct {
	// Guard checks the portal URL, every redirect, form action, SMART
	// endpoint and paging link. The address check at connect time is the
	// transport's job (Guard.Transport, or the notary's AllowAddr).
	Guard Guard
	// Registrations are the operator's SMART clients by portal origin,
	// written as Origin writes it ("https://host", or "https://host:port"
	// for a port other than 443); CheckRegistrations checks them and
	// LoadRegistrations reads them from a file. An origin without one
	// uses the demo portal's public client (DemoClientID,
	// DemoRedirectURI). Nil means none.
	Registrations map[string]Registration
	// MaxBytes bounds the bytes read from the portal for one record,
	// login pages included. Zero means 64 MiB.
	MaxBytes int64
	// MaxPages bounds the FHIR API responses read for one record
	// (pages, searches and reference reads). Zero means 2000.
	MaxPages int
	// MaxRetries is how often one exchange is retried after a 429, a 5xx
	// or a network error. Zero means 3; negative means never.
	MaxRetries int
	// Backoff is the first retry delay, doubled on each retry, with up to
	// 50% random jitter added. Zero means 200 ms.
	Backoff time.Duration
	// MaxRetryAfter is the longest Retry-After the connector waits for;
	// a portal asking for longer fails with ErrUnavailable. Zero means 30 s.
	MaxRetryAfter time.Duration
	// RequestTimeout bounds each HTTP exchange, body included. Zero
	// means 60 s.
	RequestTimeout time.Duration
	// Count is the _count asked of paged searches. Zero asks none (the
	// portal's default page size).
	Count int
	// Rand is the source of the authorization state, client assertion
	// ids and retry jitter. Nil means crypto/rand. PKCE verifiers always
	// come from crypto/rand (oauth2.GenerateVerifier).
	Rand io.Reader
}

func (c *Connector) maxBytes() int64 {
	if c.MaxBytes > 0 {
		return c.MaxBytes
	}
	return 64 << 20
}

func (c *Connector) maxPages() int {
	if c.MaxPages > 0 {
		return c.MaxPages
	}
	return 2000
}

func (c *Connector) maxRetries() int {
	switch {
	case c.MaxRetries < 0:
		return 0
	case c.MaxRetries == 0:
		return 3
	}
	return c.MaxRetries
}

func (c *Connector) rand() io.Reader {
	if c.Rand != nil {
		return c.Rand
	}
	return rand.Reader
}

func orDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// fhirID is the FHIR id syntax, the rule for a recordId (CheckRecordID)
// and for the ids a portal's resources carry.
var fhirID = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)

// ErrInvalidUsername and ErrInvalidPassword are wrapped (with
// ErrInvalidRequest) by the error of a credential no portal could be
// sent: longer than MaxCredentialLen bytes, not UTF-8, holding a control
// character (RFC 7617 forbids them in HTTP Basic; a login form would
// carry them where no user typed them), or, for fhir-basic, a username
// with a colon, which HTTP Basic cannot carry (RFC 7617 §2). Such a
// request is refused at acceptance rather than failed at the portal.
var (
	ErrInvalidUsername = errors.New("the username cannot be sent to a portal")
	ErrInvalidPassword = errors.New("the password cannot be sent to a portal")
)

// MaxCredentialLen bounds a username and a password, in bytes.
const MaxCredentialLen = 1024

// checkCredentials applies ErrInvalidUsername's and ErrInvalidPassword's
// rules. Its errors never quote a credential.
func checkCredentials(systemType string, c Credentials) error {
	for _, f := range []struct {
		v    string
		kind error
	}{{c.Username, ErrInvalidUsername}, {c.Password, ErrInvalidPassword}} {
		why := ""
		switch {
		case len(f.v) > MaxCredentialLen:
			why = fmt.Sprintf("longer than %d bytes", MaxCredentialLen)
		case !utf8.ValidString(f.v):
			why = "not UTF-8"
		case strings.ContainsFunc(f.v, unicode.IsControl):
			why = "it holds a control character"
		}
		if why != "" {
			return &Error{Kind: ErrInvalidRequest, Err: fmt.Errorf("%w: %s", f.kind, why)}
		}
	}
	if systemType == acds.SystemFHIRBasic && strings.Contains(c.Username, ":") {
		return &Error{Kind: ErrInvalidRequest, Err: fmt.Errorf("%w: HTTP Basic (fhir-basic) cannot carry a colon in a username (RFC 7617)", ErrInvalidUsername)}
	}
	return nil
}

// ErrInvalidRecordID is wrapped (with ErrInvalidRequest) by the error
// for a recordId that is not a FHIR id.
var ErrInvalidRecordID = errors.New("recordId must be a FHIR id: 1 to 64 characters from A-Z, a-z, 0-9, '-' and '.'")

// ErrRecordIDRequired is wrapped (with ErrInvalidRequest) by the error
// for an empty recordId on a connector whose login names no patient
// (fhir-basic): only a SMART login's patient context can stand for it.
var ErrRecordIDRequired = errors.New("recordId is required for fhir-basic: its login names no patient, so an empty recordId cannot mean the patient of the login")

// loginNamesPatient reports whether the login of systemType can name the
// record's patient (the token response's patient context), so that an
// empty recordId means that patient.
func loginNamesPatient(systemType string) bool {
	return systemType == acds.SystemSMARTPassword || systemType == acds.SystemSMARTForm || systemType == acds.SystemDemo
}

// CheckRecordID returns an error wrapping ErrInvalidRequest and
// ErrInvalidRecordID when id is not a FHIR id (1 to 64 characters from
// A-Z, a-z, 0-9, '-' and '.'), the only ids the connectors fetch. It is
// the one recordId rule: Admit and Fetch apply it.
func CheckRecordID(id string) error {
	if !fhirID.MatchString(id) {
		return &Error{Kind: ErrInvalidRequest, Err: ErrInvalidRecordID}
	}
	return nil
}

// Admit decides, without any network access, whether req can be
// fetched at all: a supported systemType, a recordId that passes
// CheckRecordID or is empty where the login names the patient (the
// token's patient context: smart-* and demo), a username and a password,
// and a portal URL that the Guard's CheckURL allows. Fetch starts with
// exactly this check, so a request Admit accepts fails later only for
// what needs the portal (its name, its addresses at connect time, its
// answers). The errors are those of Fetch: they wrap
// ErrUnsupportedSystemType, ErrInvalidRequest (with ErrInvalidRecordID
// for a bad recordId, ErrRecordIDRequired for an empty one on fhir-basic,
// ErrMalformedURL for a portalUrl that is not an absolute URL with a
// host) or ErrForbidden.
func (c *Connector) Admit(req Request) error {
	return redactorFor(req).wrap(c.admit(req))
}

// admit is Admit without the redaction, for callers that redact once at
// their own boundary.
func (c *Connector) admit(req Request) error {
	if !slices.Contains(acds.SystemTypes(), req.SystemType) {
		red := redactorFor(req)
		return &Error{Kind: ErrUnsupportedSystemType, Detail: fmt.Sprintf("%q; supported: %s", red.detail(req.SystemType), strings.Join(acds.SystemTypes(), ", "))}
	}
	switch {
	case req.RecordID == "" && !loginNamesPatient(req.SystemType):
		return &Error{Kind: ErrInvalidRequest, Err: ErrRecordIDRequired}
	case req.RecordID != "":
		if err := CheckRecordID(req.RecordID); err != nil {
			return err
		}
	}
	if req.Credentials.Username == "" || req.Credentials.Password == "" {
		return &Error{Kind: ErrInvalidRequest, Detail: "username and password are required"}
	}
	if err := checkCredentials(req.SystemType, req.Credentials); err != nil {
		return err
	}
	_, err := c.Guard.CheckURL(req.PortalURL)
	if errors.Is(err, ErrMalformedURL) {
		return &Error{Kind: ErrInvalidRequest, Op: "portalUrl", Err: err}
	}
	return err
}

// checkPublished applies the Guard to a URL the portal published (an
// endpoint in its SMART configuration, a login form's action): refused is
// ErrForbidden as for the caller's URL, malformed is the portal's fault.
func (c *Connector) checkPublished(op, raw string) error {
	_, err := c.Guard.CheckURL(raw)
	if errors.Is(err, ErrMalformedURL) {
		return &Error{Kind: ErrResponseInvalid, Op: op, Err: err}
	}
	return err
}

// fhirType is the syntax of a resource type name.
var fhirType = regexp.MustCompile(`^[A-Z][A-Za-z]{1,63}$`)

// maxAuthPage caps one login page or token answer.
const maxAuthPage = 1 << 20

// session is the state of one Fetch.
type session struct {
	c     *Connector
	hc    *http.Client
	base  *url.URL // FHIR base, no trailing slash
	red   redactor
	creds Credentials
	auth  func(*http.Request)

	bytes int64
	pages int
	lines []string
	// patientContext is the token's patient, for smart-* flows.
	patientContext string
	// redirectURI is intercepted by CheckRedirect in the form flow.
	redirectURI string
}

// Fetch logs in to the portal of req and fetches the record, over hc
// (whose Transport it uses; it does not modify hc). Errors wrap one of the
// package's error classes and never contain the credentials.
func (c *Connector) Fetch(ctx context.Context, hc *http.Client, req Request) (*Record, error) {
	red := redactorFor(req)
	rec, err := c.fetch(ctx, hc, req, red)
	return rec, red.wrap(err)
}

// fetch is Fetch without the final redaction of the error's text (red
// still blanks out the portal text quoted in Details).

func (c *Connector) fetch(ctx context.Context, hc *http.Client, req Request, red redactor) (*Record, error) {
	if hc == nil {
		return nil, &Error{Kind: ErrInvalidRequest, Detail: "no HTTP client"}
	}
	if err := c.admit(req); err != nil {
		return nil, err
	}
	u, err := c.Guard.CheckURL(req.PortalURL)
	if err != nil {
		return nil, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	s := &session{c: c, base: u, red: red, creds: req.Credentials}
	jar, _ := cookiejar.New(nil)
	hcc := *hc
	hcc.Jar = jar
	hcc.CheckRedirect = s.checkRedirect
	s.hc = &hcc

	switch req.SystemType {
	case acds.SystemFHIRBasic:
		s.auth = func(r *http.Request) { r.SetBasicAuth(s.creds.Username, s.creds.Password) }
	case acds.SystemSMARTPassword:
		err = s.passwordGrant(ctx)
	case acds.SystemSMARTForm, acds.SystemDemo:
		err = s.formFlow(ctx, req.RecordID)
	}
	if err != nil {
		return nil, err
	}
	id := req.RecordID
	if id == "" {
		id = s.patientContext
	}
	switch {
	case id == "":
		return nil, &Error{Kind: ErrRecordNotFound, Op: "patient context", Detail: "recordId is empty, and the portal's token names no patient"}
	case !fhirID.MatchString(id):
		return nil, &Error{Kind: ErrResponseInvalid, Op: "patient context", Detail: "the token's patient is not a FHIR id"}
	}
	return s.fetchRecord(ctx, id)
}
