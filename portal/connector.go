package portal

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/prover"
	"golang.org/x/oauth2"
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
	RecordID    string      // the Patient id; empty means the token's patient context (smart-*)
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
// marshals without its Key (String, GoString, LogValue, MarshalJSON).
type Registration struct {
	ClientID    string // required
	RedirectURI string // required; the connector intercepts the redirect and never dials it
	Scope       string // empty means "openid launch/patient patient/*.read"
	// Key, when set, authenticates the client at the token endpoint with
	// private_key_jwt (RFC 7523): ECDSA P-256 (ES256), P-384 (ES384) or
	// RSA ≥ 2048 bits (RS384). Nil means a public client.
	Key crypto.Signer
	// KeyID is the "kid" of Key's JWS header, when the portal wants one.
	KeyID string
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
	// Everything is true when $everything answered, false when the record
	// was assembled from per-type searches.
	Everything bool
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
// fetched at all: a supported systemType, a recordId that is empty (the
// token's patient context, smart-* only) or passes CheckRecordID, a
// username and a password, and a portal URL that the Guard's CheckURL
// allows. Fetch starts with exactly this check, so a request Admit
// accepts fails later only for what needs the portal (its name, its
// addresses at connect time, its answers). The errors are those of
// Fetch: they wrap ErrUnsupportedSystemType, ErrInvalidRequest (with
// ErrInvalidRecordID for a bad recordId, ErrMalformedURL for a portalUrl
// that is not an absolute URL with a host) or ErrForbidden.
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
	if req.RecordID != "" {
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
	if !fhirID.MatchString(id) {
		return nil, &Error{Kind: ErrInvalidRequest, Detail: "no recordId, and the portal gave no patient context"}
	}
	return s.fetchRecord(ctx, id)
}

func (s *session) checkRedirect(req *http.Request, via []*http.Request) error {
	if s.redirectURI != "" && strings.HasPrefix(req.URL.String(), s.redirectURI) {
		return http.ErrUseLastResponse
	}
	return s.c.Guard.CheckRedirect(req, via)
}

// exchange is one HTTP exchange with its body read.
type exchange struct {
	status int
	header http.Header
	body   []byte
	url    *url.URL // the final URL, after redirects
}

// retryable classes of failure.
func retryStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusInternalServerError ||
		code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// retryAfter parses a Retry-After header (seconds or an HTTP date).
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(strings.TrimSpace(h), 10, 63); err == nil {
		return time.Duration(min(n, 1<<32)) * time.Second, true // capped: no overflow
	} else if errors.Is(err, strconv.ErrRange) {
		return time.Duration(1<<32) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

func (s *session) backoff(attempt int) time.Duration {
	d := orDuration(s.c.Backoff, 200*time.Millisecond) << attempt
	if j, err := rand.Int(s.c.rand(), big.NewInt(int64(d/2)+1)); err == nil {
		d += time.Duration(j.Int64())
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// classifyTransport turns a failed round trip into an error, and says
// whether a retry may help. The error names the portal's host and what
// went wrong, never an address it resolved to, the notary's address or
// the resolver's (see netError).
func (s *session) classifyTransport(op string, err error) (error, bool) {
	host := s.base.Hostname()
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Hostname() != "" {
			host = u.Hostname() // a redirect may have led elsewhere
		}
	}
	var (
		fe *ForbiddenError
		pe *Error
		ne *prover.NotaryError
	)
	switch {
	case errors.As(err, &fe):
		if fe.dialled {
			// The guard refused the address the name resolved to at
			// connect time: say so without the address.
			return &ForbiddenError{Target: host, Reason: "it resolves to a refused address (" + fe.Reason + ")"}, false
		}
		return fe, false
	case errors.Is(err, ErrForbidden):
		return &Error{Kind: ErrForbidden, Op: op}, false
	case errors.As(err, &pe):
		// Already classified by this package: GuardedDialer (whose text
		// is safe), CheckRedirect.
		if errors.Is(pe.Kind, ErrUnavailable) {
			return &Error{Kind: ErrUnavailable, Op: op, Err: pe.Err}, true
		}
		return pe, false
	case errors.As(err, &ne):
		switch {
		case ne.Type == notary.ProblemTargetUnresolved,
			// Notaries older than ProblemTargetUnresolved answered 403.
			ne.Status == http.StatusForbidden && strings.Contains(ne.Detail, "cannot resolve"):
			return &Error{Kind: ErrUnavailable, Op: op, Err: &netError{msg: host + ": the name could not be resolved", cause: err}}, true
		case ne.Status == http.StatusForbidden:
			return &ForbiddenError{Target: host, Reason: "the notary refused its address (not a public address)"}, false
		case ne.Status == http.StatusBadGateway:
			return &Error{Kind: ErrUnavailable, Op: op, Err: &netError{msg: host + ": no address of the portal answered", cause: err}}, true
		}
		// Full (503) or failing: the service's side, not the portal's.
		return &Error{Kind: ErrNotarization, Op: op, Err: &netError{msg: fmt.Sprintf("the notary answered HTTP %d", ne.Status), cause: err}}, true
	case errors.Is(err, prover.ErrNotary):
		return &Error{Kind: ErrNotarization, Op: op, Err: &netError{msg: "the notary could not be reached", cause: err}}, true
	case errors.Is(err, ErrResponseInvalid):
		return err, false
	}
	return unreachable(op, host, err), true
}

// do runs one exchange with bounded retries. build makes a fresh request
// for each attempt. limit caps the body; data exchanges also count toward
// the record's byte and page limits.
func (s *session) do(ctx context.Context, op string, data bool, build func(ctx context.Context) (*http.Request, error)) (*exchange, error) {
	retries := s.c.maxRetries()
	for attempt := 0; ; attempt++ {
		if data && s.pages >= s.c.maxPages() {
			return nil, &Error{Kind: ErrResponseInvalid, Op: op, Err: ErrLimit, Detail: fmt.Sprintf("more than %d FHIR responses", s.c.maxPages())}
		}
		ex, err, wait := s.once(ctx, op, data, build)
		if err == nil {
			return ex, nil
		}
		if wait < 0 || attempt >= retries || ctx.Err() != nil {
			if ctx.Err() != nil && !errors.Is(err, ErrForbidden) {
				return nil, &Error{Kind: ErrUnavailable, Op: op, Err: ctx.Err()}
			}
			return nil, err
		}
		if b := s.backoff(attempt); b > wait {
			wait = b
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, &Error{Kind: ErrUnavailable, Op: op, Err: err}
		}
	}
}

// once runs one attempt. wait < 0 means the error is final; otherwise it
// is the least time to wait before retrying.
func (s *session) once(ctx context.Context, op string, data bool, build func(ctx context.Context) (*http.Request, error)) (*exchange, error, time.Duration) {
	actx, cancel := context.WithTimeout(ctx, orDuration(s.c.RequestTimeout, time.Minute))
	defer cancel()
	req, err := build(actx)
	if err != nil {
		return nil, &Error{Kind: ErrInvalidRequest, Op: op, Err: err}, -1
	}
	req.Header.Set("Accept-Encoding", "identity")
	if data {
		s.pages++
		s.lines = append(s.lines, requestLine(req))
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		e, retry := s.classifyTransport(op, err)
		if !retry {
			return nil, e, -1
		}
		return nil, e, 0
	}
	defer resp.Body.Close()
	limit := s.c.maxBytes() - s.bytes
	if !data {
		limit = min(limit, maxAuthPage)
	}
	body, err := readBody(resp, limit+1)
	s.bytes += int64(len(body))
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Op: op, Status: resp.StatusCode, Err: safeCause(err)}, 0
	}
	if int64(len(body)) > limit {
		return nil, &Error{Kind: ErrResponseInvalid, Op: op, Err: ErrLimit, Detail: fmt.Sprintf("more than %d bytes", s.c.maxBytes())}, -1
	}
	if retryStatus(resp.StatusCode) {
		e := &Error{Kind: ErrUnavailable, Op: op, Status: resp.StatusCode, Detail: s.outcomeText(body)}
		wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		if ok && wait > orDuration(s.c.MaxRetryAfter, 30*time.Second) {
			e.Detail = fmt.Sprintf("Retry-After %s is beyond the %s the service waits", wait, orDuration(s.c.MaxRetryAfter, 30*time.Second))
			return nil, e, -1
		}
		return nil, e, wait
	}
	return &exchange{status: resp.StatusCode, header: resp.Header, body: body, url: resp.Request.URL}, nil, 0
}

// readBody reads at most max bytes of resp's body. When the portal
// announced the length (within max), the buffer is allocated once at that
// size instead of growing (and being copied) as io.ReadAll's does, which
// for a megabyte page cost several copies.
func readBody(resp *http.Response, max int64) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n >= max {
		return io.ReadAll(io.LimitReader(resp.Body, max))
	}
	buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, max))
	return buf.Bytes(), err
}

// requestLine renders req as an HTTP/1.1 request line.
func requestLine(req *http.Request) string {
	return req.Method + " " + req.URL.RequestURI() + " HTTP/1.1"
}

// outcomeText extracts the diagnostics of an OperationOutcome body, or a
// capped excerpt of any other body, redacted.
func (s *session) outcomeText(body []byte) string {
	var oo struct {
		ResourceType string `json:"resourceType"`
		Issue        []struct {
			Code        string `json:"code"`
			Diagnostics string `json:"diagnostics"`
		} `json:"issue"`
	}
	if json.Unmarshal(body, &oo) == nil && oo.ResourceType == "OperationOutcome" {
		var parts []string
		for _, is := range oo.Issue {
			parts = append(parts, strings.TrimSpace(is.Code+" "+is.Diagnostics))
		}
		return s.red.detail(strings.Join(parts, "; "))
	}
	return ""
}

// authError classifies a 401 or 403 answer of the FHIR API.
func (s *session) authError(op string, ex *exchange) error {
	var oo struct {
		Issue []struct {
			Code    string `json:"code"`
			Details struct {
				Coding []struct {
					Code string `json:"code"`
				} `json:"coding"`
			} `json:"details"`
		} `json:"issue"`
	}
	json.Unmarshal(ex.body, &oo)
	mfa, locked := strings.Contains(strings.ToLower(ex.header.Get("WWW-Authenticate")), "mfa"), false
	for _, is := range oo.Issue {
		locked = locked || is.Code == "lock-error"
		for _, c := range is.Details.Coding {
			mfa = mfa || strings.Contains(c.Code, "mfa")
			locked = locked || strings.Contains(c.Code, "locked")
		}
	}
	e := &Error{Op: op, Status: ex.status, Detail: s.outcomeText(ex.body)}
	switch {
	case mfa:
		e.Kind = ErrMFARequired
	case locked:
		e.Kind, e.Err = ErrAuthFailed, ErrAccountLocked
	case ex.status == http.StatusForbidden:
		e.Kind = ErrRecordNotFound
	default:
		e.Kind = ErrAuthFailed
	}
	return e
}

// smartConfig is the part of .well-known/smart-configuration used here.
type smartConfig struct {
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
}

func (s *session) discover(ctx context.Context) (*smartConfig, error) {
	u := s.base.String() + "/.well-known/smart-configuration"
	ex, err := s.do(ctx, "SMART discovery", false, getter(u, "application/json"))
	if err != nil {
		return nil, err
	}
	if ex.status != http.StatusOK {
		return nil, &Error{Kind: ErrResponseInvalid, Op: "SMART discovery", Status: ex.status, Detail: "no SMART configuration"}
	}
	var sc smartConfig
	if err := json.Unmarshal(ex.body, &sc); err != nil {
		return nil, &Error{Kind: ErrResponseInvalid, Op: "SMART discovery", Err: err}
	}
	if err := s.c.checkPublished("SMART discovery: token endpoint", sc.TokenEndpoint); err != nil {
		return nil, err
	}
	return &sc, nil
}

func getter(u, accept string) func(ctx context.Context) (*http.Request, error) {
	return func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err == nil {
			req.Header.Set("Accept", accept)
		}
		return req, err
	}
}

func poster(u string, form url.Values, accept string) func(ctx context.Context) (*http.Request, error) {
	body := form.Encode()
	return func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Accept", accept)
		}
		return req, err
	}
}

func (s *session) registration() Registration {
	origin, _ := Origin(s.base.String()) // the guard admitted base: it has one
	r, ok := s.c.Registrations[origin]
	if !ok {
		r = Registration{ClientID: DemoClientID, RedirectURI: DemoRedirectURI}
	}
	if r.Scope == "" {
		r.Scope = "openid launch/patient patient/*.read"
	}
	return r
}

// oauthConfig is the OAuth2 client of reg at the portal's endpoints.
// Client authentication is always in the form body: client_id for a
// public client, and for a client with a key the private_key_jwt
// assertion that tokenTransport adds.
func oauthConfig(reg Registration, sc *smartConfig) *oauth2.Config {
	return &oauth2.Config{
		ClientID: reg.ClientID, RedirectURL: reg.RedirectURI, Scopes: strings.Fields(reg.Scope),
		Endpoint: oauth2.Endpoint{AuthURL: sc.AuthorizationEndpoint, TokenURL: sc.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams},
	}
}

// tokenTransport carries x/oauth2's token requests through the session:
// each is one exchange of session.do over the request's *http.Client, so
// the SSRF guard, the notarized transport, the retries and the byte
// limits apply to it as to every other exchange. When the registration
// has a key it adds the private_key_jwt client assertion (RFC 7523),
// which x/oauth2 does not make.
type tokenTransport struct {
	s        *session
	op       string
	endpoint string // the token endpoint, the assertion's audience
	reg      Registration
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxAuthPage))
		req.Body.Close()
		if err != nil {
			return nil, &Error{Kind: ErrInvalidRequest, Op: t.op, Err: err}
		}
		body = b
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, &Error{Kind: ErrInvalidRequest, Op: t.op, Err: err}
	}
	if t.reg.Key != nil {
		a, err := clientAssertion(t.reg.Key, t.reg.KeyID, t.reg.ClientID, t.endpoint, time.Now(), t.s.c.rand())
		if err != nil {
			return nil, &Error{Kind: ErrInvalidRequest, Op: t.op, Err: err}
		}
		form.Set("client_assertion_type", ClientAssertionType)
		form.Set("client_assertion", a)
	}
	ex, err := t.s.do(req.Context(), t.op, false, poster(req.URL.String(), form, "application/json"))
	if err != nil {
		return nil, err
	}
	h := ex.header
	if json.Valid(ex.body) {
		// Token answers are JSON (RFC 6749 §5); x/oauth2 reads a body as
		// a form unless its Content-Type says JSON, and portals do not
		// always say so.
		h = h.Clone()
		h.Set("Content-Type", "application/json")
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", ex.status, http.StatusText(ex.status)), StatusCode: ex.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(bytes.NewReader(ex.body)), ContentLength: int64(len(ex.body)), Request: req,
	}, nil
}

// oauthContext is ctx carrying, for x/oauth2, a client whose every
// exchange is a tokenTransport one.
func (s *session) oauthContext(ctx context.Context, op, endpoint string, reg Registration) context.Context {
	hc := &http.Client{
		Transport: &tokenTransport{s: s, op: op, endpoint: endpoint, reg: reg},
		// Redirects were followed (and checked) by session.do already.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return context.WithValue(ctx, oauth2.HTTPClient, hc)
}

// useToken installs the bearer token of a token request's outcome, or
// classifies its failure. The error never quotes x/oauth2's text, which
// holds the portal's whole answer: only the OAuth2 error code and
// description, redacted.
func (s *session) useToken(op string, tok *oauth2.Token, err error) error {
	var ue *url.Error
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &ue):
		// The exchange itself failed; session.do classified why, unless
		// it never ran (the context ended first).
		var pe *Error
		var fe *ForbiddenError
		if errors.As(ue.Err, &pe) || errors.As(ue.Err, &fe) {
			return ue.Err
		}
		return &Error{Kind: ErrUnavailable, Op: op, Err: safeCause(ue.Err)}
	case errors.As(err, &re) && re.Response != nil && (re.Response.StatusCode < 200 || re.Response.StatusCode > 299):
		desc := strings.ToLower(re.ErrorDescription)
		e := &Error{Op: op, Status: re.Response.StatusCode, Detail: s.red.detail(strings.TrimSpace(re.ErrorCode + " " + re.ErrorDescription))}
		switch {
		case strings.Contains(re.ErrorCode, "mfa") || strings.Contains(desc, "multifactor") || strings.Contains(desc, "multi-factor"):
			e.Kind = ErrMFARequired
		case re.ErrorCode == "invalid_grant" && strings.Contains(desc, "locked"):
			e.Kind, e.Err = ErrAuthFailed, ErrAccountLocked
		case re.ErrorCode == "invalid_grant" || re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client" || re.ErrorCode == "access_denied" ||
			e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
			e.Kind = ErrAuthFailed
		default:
			e.Kind = ErrResponseInvalid
		}
		return e
	case err != nil || tok.AccessToken == "" || !strings.EqualFold(tok.TokenType, "bearer"):
		return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "no bearer token in the token response"}
	}
	at := tok.AccessToken
	s.red = append(s.red, at)
	s.patientContext, _ = tok.Extra("patient").(string)
	s.auth = func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+at) }
	return nil
}

// passwordGrant runs smart-password: discovery, then the OAuth2
// resource owner password grant.
func (s *session) passwordGrant(ctx context.Context) error {
	sc, err := s.discover(ctx)
	if err != nil {
		return err
	}
	reg := s.registration()
	const op = "password grant"
	tok, err := oauthConfig(reg, sc).PasswordCredentialsToken(s.oauthContext(ctx, op, sc.TokenEndpoint, reg), s.creds.Username, s.creds.Password)
	return s.useToken(op, tok, err)
}

func (s *session) random(n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(s.c.rand(), b); err != nil {
		return "", &Error{Kind: ErrUnavailable, Op: "random", Err: err}
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// formFlow runs SMART App Launch: authorization request with PKCE, the
// portal's login form (with its CSRF token and cookie), its consent page,
// the intercepted redirect and the code exchange.
func (s *session) formFlow(ctx context.Context, recordID string) error {
	sc, err := s.discover(ctx)
	if err != nil {
		return err
	}
	if sc.AuthorizationEndpoint == "" {
		return &Error{Kind: ErrResponseInvalid, Op: "SMART discovery", Detail: "no authorization endpoint"}
	}
	if len(sc.CodeChallengeMethods) > 0 && !slices.Contains(sc.CodeChallengeMethods, "S256") {
		return &Error{Kind: ErrResponseInvalid, Op: "SMART discovery", Detail: "the portal does not support PKCE S256"}
	}
	if err := s.c.checkPublished("SMART discovery: authorization endpoint", sc.AuthorizationEndpoint); err != nil {
		return err
	}
	reg := s.registration()
	s.redirectURI = reg.RedirectURI
	verifier := oauth2.GenerateVerifier()
	state, err := s.random(16)
	if err != nil {
		return err
	}
	authURL := oauthConfig(reg, sc).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("aud", s.base.String()))
	ex, err := s.do(ctx, "authorization request", false, getter(authURL, "text/html"))
	if err != nil {
		return err
	}
	loggedIn := false
	for step := 0; ; step++ {
		if step > 6 {
			return &Error{Kind: ErrResponseInvalid, Op: "login form", Detail: "too many login steps"}
		}
		if ex.status >= 300 && ex.status < 400 {
			return s.finishForm(ctx, ex, sc, reg, state, verifier)
		}
		if ex.status != http.StatusOK {
			return &Error{Kind: ErrResponseInvalid, Op: "login form", Status: ex.status}
		}
		page := parseHTML(string(ex.body))
		var next *htmlForm
		form := url.Values{}
	forms:
		for _, f := range page.forms {
			switch {
			case f.has(func(c htmlControl) bool { return isOTP(c.name) }):
				return &Error{Kind: ErrMFARequired, Op: "login form"}
			case f.has(func(c htmlControl) bool { return c.typ == "password" }):
				if loggedIn {
					e := &Error{Kind: ErrAuthFailed, Op: "login form", Detail: s.red.detail(strings.Join(page.errors, ", "))}
					for _, pe := range page.errors {
						if strings.Contains(pe, "locked") {
							e.Err = ErrAccountLocked
						}
					}
					return e
				}
				next, loggedIn = f, true
				fillLogin(f, form, s.creds)
			case f.has(func(c htmlControl) bool {
				return c.name == "decision" || strings.Contains(strings.ToLower(f.id), "consent")
			}):
				next = f
				fillConsent(f, form, recordID)
			default:
				continue
			}
			break forms
		}
		if next == nil {
			return &Error{Kind: ErrResponseInvalid, Op: "login form", Detail: "the portal page has no login or consent form"}
		}
		action, err := ex.url.Parse(next.action)
		if err != nil {
			return &Error{Kind: ErrResponseInvalid, Op: "login form", Detail: "bad form action"}
		}
		if err := s.c.checkPublished("login form", action.String()); err != nil {
			return err
		}
		if next.method != http.MethodPost {
			return &Error{Kind: ErrResponseInvalid, Op: "login form", Detail: "the form does not use POST"}
		}
		ex, err = s.do(ctx, "login form", false, poster(action.String(), form, "text/html"))
		if err != nil {
			return err
		}
	}
}

func isOTP(name string) bool {
	n := strings.ToLower(name)
	return n == "otp" || n == "totp" || strings.Contains(n, "mfa") || strings.Contains(n, "one_time") || n == "verification_code"
}

// fillLogin fills a login form: hidden fields kept, the password field
// and the first text-like field get the credentials.
func fillLogin(f *htmlForm, form url.Values, creds Credentials) {
	userSet := false
	for _, c := range f.controls {
		switch {
		case c.name == "":
		case c.typ == "password":
			form.Set(c.name, creds.Password)
		case c.tag == "input" && (c.typ == "text" || c.typ == "email") && !userSet:
			form.Set(c.name, creds.Username)
			userSet = true
		case c.typ == "hidden":
			form.Set(c.name, c.value)
		}
	}
}

// fillConsent approves a consent form, choosing recordID where the form
// offers a patient choice that includes it.
func fillConsent(f *htmlForm, form url.Values, recordID string) {
	for _, c := range f.controls {
		switch {
		case c.name == "":
		case c.typ == "hidden":
			form.Set(c.name, c.value)
		case c.tag == "select":
			v := ""
			if len(c.options) > 0 {
				v = c.options[0]
			}
			if slices.Contains(c.options, recordID) {
				v = recordID
			}
			form.Set(c.name, v)
		case c.name == "decision" && (c.value == "allow" || c.value == "approve" || c.value == "accept"):
			form.Set(c.name, c.value)
		}
	}
}

func (s *session) finishForm(ctx context.Context, ex *exchange, sc *smartConfig, reg Registration, state, verifier string) error {
	loc, err := ex.url.Parse(ex.header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), reg.RedirectURI) {
		return &Error{Kind: ErrResponseInvalid, Op: "authorization", Detail: "redirect to an unexpected location"}
	}
	q := loc.Query()
	if q.Get("state") != state {
		return &Error{Kind: ErrResponseInvalid, Op: "authorization", Detail: "state mismatch"}
	}
	if e := q.Get("error"); e != "" {
		return &Error{Kind: ErrAuthFailed, Op: "authorization", Detail: s.red.detail(e)}
	}
	code := q.Get("code")
	if code == "" {
		return &Error{Kind: ErrResponseInvalid, Op: "authorization", Detail: "no code"}
	}
	s.red = append(s.red, code)
	const op = "code exchange"
	tok, err := oauthConfig(reg, sc).Exchange(s.oauthContext(ctx, op, sc.TokenEndpoint, reg), code, oauth2.VerifierOption(verifier))
	return s.useToken(op, tok, err)
}

// searchTypes are searched by patient when $everything is missing (the
// US Core patient-compartment types).
var searchTypes = []string{
	"AllergyIntolerance", "CarePlan", "CareTeam", "Condition", "Device", "DiagnosticReport", "DocumentReference",
	"Encounter", "Goal", "Immunization", "MedicationRequest", "Observation", "Procedure", "ServiceRequest",
}

// collected accumulates resources, each once, in arrival order.
type collected struct {
	keys    map[string]bool
	entries []string // "Type/id"
	raw     []json.RawMessage
}

func (c *collected) add(key string, raw json.RawMessage) {
	if c.keys[key] {
		return
	}
	c.keys[key] = true
	c.entries = append(c.entries, key)
	c.raw = append(c.raw, raw)
}

func (s *session) data(ctx context.Context, u string) (*exchange, error) {
	op := "GET " + strings.TrimPrefix(u, s.base.String()+"/")
	if i := strings.IndexByte(op, '?'); i >= 0 {
		op = op[:i]
	}
	return s.do(ctx, op, true, func(ctx context.Context) (*http.Request, error) {
		req, err := getter(u, "application/fhir+json")(ctx)
		if err == nil {
			s.auth(req)
		}
		return req, err
	})
}

func (s *session) withCount(u string) string {
	if s.c.Count <= 0 {
		return u
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "_count=" + strconv.Itoa(s.c.Count)
}

func (s *session) fetchRecord(ctx context.Context, id string) (*Record, error) {
	got := &collected{keys: map[string]bool{}}
	b := s.base.String()
	everything := true
	err := s.pagesOf(ctx, s.withCount(b+"/Patient/"+id+"/$everything"), got)
	var nf *notFound
	if errors.As(err, &nf) {
		// No $everything, or no such patient: the Patient read tells which.
		ex, err := s.data(ctx, b+"/Patient/"+id)
		if err != nil {
			return nil, err
		}
		switch {
		case ex.status == http.StatusNotFound || ex.status == http.StatusGone:
			return nil, &Error{Kind: ErrRecordNotFound, Op: "GET Patient/" + id, Status: ex.status, Detail: s.outcomeText(ex.body)}
		case ex.status == http.StatusUnauthorized || ex.status == http.StatusForbidden:
			return nil, s.authError("GET Patient/"+id, ex)
		case ex.status != http.StatusOK:
			return nil, &Error{Kind: ErrResponseInvalid, Op: "GET Patient/" + id, Status: ex.status, Detail: s.outcomeText(ex.body)}
		}
		if err := s.addResource(got, ex.body, "Patient", id); err != nil {
			return nil, err
		}
		everything = false
		for _, t := range searchTypes {
			err := s.pagesOf(ctx, s.withCount(b+"/"+t+"?patient="+url.QueryEscape(id)), got)
			if errors.As(err, &nf) {
				continue // the portal does not know this type
			}
			if err != nil {
				return nil, err
			}
		}
		if err := s.followReferences(ctx, got); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	if !got.keys["Patient/"+id] {
		return nil, &Error{Kind: ErrResponseInvalid, Op: "GET Patient/" + id + "/$everything", Detail: "the answer does not contain the patient"}
	}
	var out bytes.Buffer
	out.Grow(int(s.bytes))
	out.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i, e := range got.entries {
		if i > 0 {
			out.WriteByte(',')
		}
		fu, _ := json.Marshal(b + "/" + e)
		out.WriteString(`{"fullUrl":`)
		out.Write(fu)
		out.WriteString(`,"resource":`)
		out.Write(got.raw[i])
		out.WriteByte('}')
	}
	out.WriteString(`]}`)
	return &Record{FHIR: out.Bytes(), Host: s.base.Hostname(), RequestLines: s.lines, Pages: s.pages,
		Resources: len(got.entries), Everything: everything}, nil
}

// notFound is a 404, 400, 405 or 501 answer to a search or operation: the
// portal lacks it (or, for $everything, perhaps the patient).
type notFound struct{ status int }

func (e *notFound) Error() string { return "not found: HTTP " + strconv.Itoa(e.status) }

// pagesOf reads a searchset and its next pages into got.
func (s *session) pagesOf(ctx context.Context, u string, got *collected) error {
	seen := map[string]bool{}
	for first := true; u != ""; first = false {
		if seen[u] {
			return &Error{Kind: ErrResponseInvalid, Op: "paging", Detail: "the next links loop"}
		}
		seen[u] = true
		ex, err := s.data(ctx, u)
		if err != nil {
			return err
		}
		op := "GET " + strings.TrimPrefix(ex.url.Path, s.base.Path+"/")
		switch ex.status {
		case http.StatusOK:
		case http.StatusUnauthorized, http.StatusForbidden:
			return s.authError(op, ex)
		case http.StatusNotFound, http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusGone:
			if first {
				return &notFound{status: ex.status}
			}
			fallthrough
		default:
			return &Error{Kind: ErrResponseInvalid, Op: op, Status: ex.status, Detail: s.outcomeText(ex.body)}
		}
		// One validating pass over the page, then a walk that takes each
		// resource as a slice of the body: decoding the page with
		// encoding/json scanned it twice and copied every resource.
		p, err := scanPage(ex.body)
		if err != nil {
			return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the page is not JSON (truncated?)", Err: err}
		}
		if p.resourceType != "Bundle" {
			return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the answer is not a Bundle"}
		}
		for _, e := range p.entries {
			if e.outcome {
				continue
			}
			if err := s.addHeader(got, e.resource, e.typ, e.id, e.headerErr, "", ""); err != nil {
				return err
			}
		}
		u = p.next
		if u != "" {
			nu, err := ex.url.Parse(u)
			if err != nil || nu.Scheme != s.base.Scheme || nu.Host != s.base.Host {
				return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "a next link leaves the portal"}
			}
			u = nu.String()
		}
	}
	return nil
}

// addResource checks a resource's type and id and collects it.
func (s *session) addResource(got *collected, raw json.RawMessage, wantType, wantID string) error {
	if wantType != "" && !json.Valid(raw) { // a read's body; page entries were checked with their page
		return &Error{Kind: ErrResponseInvalid, Op: "GET " + wantType + "/" + wantID, Detail: "the answer is not JSON"}
	}
	typ, id, err := resourceHeader(raw)
	return s.addHeader(got, raw, typ, id, err, wantType, wantID)
}

// addHeader is addResource for a resource whose header was read already
// (typ, id and the error of reading them).
func (s *session) addHeader(got *collected, raw json.RawMessage, typ, id string, err error, wantType, wantID string) error {
	if err != nil || raw == nil || !fhirType.MatchString(typ) || !fhirID.MatchString(id) {
		return &Error{Kind: ErrResponseInvalid, Op: "reading resources", Detail: "an entry is not a resource with a type and an id"}
	}
	if wantType != "" && (typ != wantType || id != wantID) {
		return &Error{Kind: ErrResponseInvalid, Op: "GET " + wantType + "/" + wantID, Detail: "the portal answered another resource"}
	}
	got.add(typ+"/"+id, raw)
	return nil
}

var referenceRE = regexp.MustCompile(`"reference"\s*:\s*"([^"]{1,512})"`)
var relRefRE = regexp.MustCompile(`^([A-Z][A-Za-z]{1,63})/([A-Za-z0-9\-.]{1,64})$`)

// followReferences reads the resources that collected resources refer to
// and that searches did not return (practitioners, organizations,
// medications, …), two levels deep.
func (s *session) followReferences(ctx context.Context, got *collected) error {
	b := s.base.String() + "/"
	done := 0
	for range 2 {
		var missing []string
		want := map[string]bool{}
		for _, raw := range got.raw[done:] {
			for _, m := range referenceRE.FindAllSubmatch(raw, -1) {
				r := strings.TrimPrefix(string(m[1]), b)
				if relRefRE.MatchString(r) && !got.keys[r] && !want[r] {
					want[r] = true
					missing = append(missing, r)
				}
			}
		}
		done = len(got.raw)
		if len(missing) == 0 {
			return nil
		}
		for _, r := range missing {
			ex, err := s.data(ctx, b+r)
			if err != nil {
				return err
			}
			switch ex.status {
			case http.StatusOK:
			case http.StatusNotFound, http.StatusGone, http.StatusForbidden:
				continue // dangling or not visible: the record is complete without it
			case http.StatusUnauthorized:
				return s.authError("GET "+r, ex)
			default:
				return &Error{Kind: ErrResponseInvalid, Op: "GET " + r, Status: ex.status, Detail: s.outcomeText(ex.body)}
			}
			typ, id, _ := strings.Cut(r, "/")
			if err := s.addResource(got, ex.body, typ, id); err != nil {
				return err
			}
		}
	}
	return nil
}
