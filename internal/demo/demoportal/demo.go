package demoportal

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/portal"
)

// The demo login, used when Options leave it empty. The demo's SMART
// client is portal.DemoClientID with portal.DemoRedirectURI, the public
// client the connector uses for an origin without a registration.
const (
	Username = "demo"
	Password = "demo-password"
)

// Failures are the faults a Portal can be told to inject. The zero
// value injects none.
type Failures struct {
	// RejectPassword refuses every login as a wrong password.
	RejectPassword bool
	// Locked refuses every login as a locked account.
	Locked bool
	// MFA asks every login for a second factor, which no client of the
	// demo can give.
	MFA bool
	// RateLimited answers the first RateLimited FHIR API requests with
	// 429 Too Many Requests and a Retry-After of RetryAfter.
	RateLimited int
	// RetryAfter is the Retry-After of RateLimited and ServerErrors
	// answers. Zero means 1 second. It is sent in whole seconds.
	RetryAfter time.Duration
	// ServerErrors answers the first ServerErrors FHIR API requests with
	// 503 Service Unavailable (without Retry-After). Negative means all.
	ServerErrors int
	// Slow delays every FHIR API answer by this long (or until the client
	// goes away).
	Slow time.Duration
	// TruncatePages cuts the JSON of every search and $everything page in
	// half (with a Content-Length that matches the cut body).
	TruncatePages bool
	// NoEverything makes Patient/{id}/$everything unknown (404 with an
	// OperationOutcome, as servers without the operation answer) and
	// leaves it out of the CapabilityStatement, so that clients must
	// fall back to per-type searches.
	NoEverything bool
	// NoCapabilityStatement makes GET /fhir/metadata answer 404: the
	// portal publishes no CapabilityStatement.
	NoCapabilityStatement bool
	// BareIDBlind makes searches match a reference parameter only in its
	// type/id form (patient=Patient/pat-0001), as some servers do: the
	// bare id (patient=pat-0001) matches nothing.
	BareIDBlind bool
	// UnsupportedTypes are types the portal does not search: absent from
	// its CapabilityStatement, their searches answer 404 as for an unknown
	// type. Their resources can still be read.
	UnsupportedTypes []string
	// FailSearch is a type whose every search answers FailStatus (zero
	// means 500) with an OperationOutcome; a FailStatus of 200 answers
	// the OperationOutcome instead of a Bundle.
	FailSearch string
	FailStatus int
	// IgnoreSearchParams makes searches ignore their parameters and
	// answer every resource of the type, every patient's: a server that
	// does not apply a search parameter it does not support.
	IgnoreSearchParams bool
	// ForeignNext makes the next links of searches and $everything point
	// to another origin.
	ForeignNext bool
	// WrongIss puts another issuer's iss in authorization responses (with
	// Options.IssParameter), as a mix-up attack would (RFC 9207).
	WrongIss bool
}

// The page styles of Pages.Style.
const (
	StyleDemo         = ""              // the demo's own pages
	StyleOIDCProvider = "oidc-provider" // node-oidc-provider's interaction pages
	StyleDex          = "dex"           // Dex's password connector and approval pages
)

// Pages say how the portal draws its App Launch login. The zero value
// draws the demo's own login form and consent page.
type Pages struct {
	// Style draws the login and consent pages as a provider does:
	// StyleDemo (a login form, a consent form with a patient choice and
	// Allow/Deny buttons), StyleOIDCProvider (node-oidc-provider's
	// interaction pages: the transaction in the form action's path, a
	// consent form of one hidden prompt=consent and a Continue button, a
	// Cancel link; the token's patient is the first patient) or StyleDex
	// (Dex's password connector behind its own URL, a login re-rendered
	// with 401 after a wrong password, and an approval page of two forms
	// without action, Grant Access and Cancel; the first patient too).
	Style string
	// Chooser puts a sign-in chooser before the login, as Dex draws it
	// for several connectors: links to the password login, to an
	// external provider (a redirect off the portal's origin) and to a
	// provider on the portal that asks no password.
	Chooser bool
	// RejectStatus is the status of a login page re-rendered after a
	// wrong password or a locked account. Zero means 200 (401 for
	// StyleDex).
	RejectStatus int
	// ScriptOnly draws the login as a single-page application: a page
	// with no form, only the script that would build one.
	ScriptOnly bool
}

// Options configure a Portal. Every zero value is usable.
type Options struct {
	// Seed makes the synthetic patients; the same seed gives the same
	// records, byte for byte.
	Seed uint64
	// Patients is the number of patients. Zero means 25. Patient i (from
	// 0) has id PatientID(i); sizes cycle from ~13 KB through ~1 MB (i%6
	// == 3) to ~6.5 MB (i%6 == 4).
	Patients int
	// Username and Password are the one account of the portal. Empty
	// means Username and Password. The account reads every
	// patient; SMART tokens carry the patient chosen at consent (form
	// flow) or the first patient (password grant) as their patient
	// context.
	Username, Password string
	// ClientID and RedirectURI are the registered SMART client. Empty
	// means portal.DemoClientID and portal.DemoRedirectURI.
	ClientID, RedirectURI string
	// PageSize is the number of entries per searchset page, also the
	// maximum _count a client may ask for. Zero means 250.
	PageSize int
	// ClientKey, when set, is the registered client's public key
	// (*ecdsa.PublicKey P-256/P-384 or *rsa.PublicKey): the token
	// endpoint then requires private_key_jwt client authentication. Nil
	// means a public client.
	ClientKey crypto.PublicKey
	// Hosts are extra DNS names for the server certificate; "localhost",
	// 127.0.0.1 and ::1 are always in it.
	Hosts []string
	// Pages say how the login pages are drawn.
	Pages Pages
	// ScopesSupported is the discovery document's scopes_supported; the
	// authorization and token endpoints refuse any other scope
	// (invalid_scope). Nil means openid, launch/patient, patient/*.read,
	// user/*.read, offline_access, and with PermissionV2 also
	// patient/*.rs and user/*.rs. A token reads the FHIR API only with a
	// read scope (patient/*.read, patient/*.rs, user/*.read, user/*.rs).
	ScopesSupported []string
	// PermissionV2 advertises SMART v2 scopes (capability permission-v2).
	PermissionV2 bool
	// ClientSecret makes the registered client confidential: the token
	// endpoint then requires this secret, sent as ClientAuthMethod says.
	ClientSecret string
	// ClientAuthMethod is how the client is registered to send its
	// ClientSecret: "client_secret_basic" (the default) or
	// "client_secret_post". The discovery document lists both, as
	// providers that register each client with one method do; the token
	// endpoint takes only this one (invalid_client otherwise).
	ClientAuthMethod string
	// NoPasswordGrant leaves the password grant out of
	// grant_types_supported, and the token endpoint refuses it
	// (unsupported_grant_type).
	NoPasswordGrant bool
	// IssParameter advertises authorization_response_iss_parameter_supported
	// and puts iss in every authorization response (RFC 9207).
	IssParameter bool
	// Failures are injected faults.
	Failures Failures
	// Now is the clock of certificates and tokens. Nil means time.Now.
	Now func() time.Time
}

// PatientInfo describes one demo patient.
type PatientInfo struct {
	ID        string // the FHIR id, e.g. "pat-0004"
	Name      string // display name
	Resources int    // resources in $everything (compartment and referenced)
	// Compartment is how many of Resources are in the patient's
	// compartment (found by a search by patient); the others are shared
	// resources they refer to (practitioners, organizations, medications).
	Compartment int
	Bytes       int // total JSON size of those resources
}

// Portal is a synthetic clinical portal: a FHIR R4 API with HTTP Basic
// auth, SMART discovery, an OAuth2 password grant and a SMART App Launch
// authorization-code flow with PKCE through an HTML login form, over
// HTTPS with its own CA. It exists for tests, `acds portal` and `acds
// demo`; it keeps everything in memory and is safe for concurrent use.
type Portal struct {
	opts    Options
	now     func() time.Time
	caCert  *x509.Certificate
	caPEM   []byte
	cert    tls.Certificate
	records []*record
	byRef   map[string]*resource // "Type/id" → resource
	owner   map[string]string    // "Type/id" → patient id, compartment resources only

	mu       sync.Mutex
	apiCalls int
	tokens   map[string]grant // access token → grant
	txns     map[string]*txn  // login transaction id → state
	codes    map[string]*authCode
	jtis     map[string]bool // client assertion ids seen
	tokenLog []TokenRequest
	servers  []*http.Server
	closed   bool
}

type grant struct {
	patient string // the token's patient context
	only    bool   // the token reads only that patient (patient-level scopes)
	read    bool   // the token's scope lets it read the FHIR API
	expires time.Time
}

// TokenRequest is one request the token endpoint answered, for tests.
type TokenRequest struct {
	GrantType  string // "password", "authorization_code", …
	Scope      string // the scope asked (password grant) or granted (code)
	ClientAuth string // "none", "private_key_jwt", "client_secret_basic" or "client_secret_post"
	Status     int    // the HTTP status of the answer
}

// TokenRequests returns the requests the token endpoint answered so far,
// in order.
func (d *Portal) TokenRequests() []TokenRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.tokenLog)
}

type txn struct {
	cookie, csrf                     string
	clientID, redirect, state, chall string
	scope                            string
	loggedIn                         bool
	expires                          time.Time
}

type authCode struct {
	clientID, redirect, chall, patient, scope string
	expires                                   time.Time
}

// New generates the patients and the portal's CA and server
// certificate.
func New(opts Options) (*Portal, error) {
	if opts.Patients == 0 {
		opts.Patients = 25
	}
	if opts.Patients < 0 || opts.Patients > 10000 {
		return nil, fmt.Errorf("portal: demo patients %d out of range 1..10000", opts.Patients)
	}
	if opts.Username == "" {
		opts.Username = Username
	}
	if opts.Password == "" {
		opts.Password = Password
	}
	if opts.ClientID == "" {
		opts.ClientID = portal.DemoClientID
	}
	if opts.RedirectURI == "" {
		opts.RedirectURI = portal.DemoRedirectURI
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 250
	}
	if opts.ClientKey != nil {
		if _, err := portal.AssertionAlgorithm(opts.ClientKey); err != nil {
			return nil, err
		}
	}
	switch {
	case opts.ClientKey != nil && opts.ClientSecret != "":
		return nil, errors.New("portal: demo client with both a key and a secret")
	case opts.ClientAuthMethod == "" && opts.ClientSecret != "":
		opts.ClientAuthMethod = "client_secret_basic"
	case opts.ClientAuthMethod != "" && opts.ClientAuthMethod != "client_secret_basic" && opts.ClientAuthMethod != "client_secret_post",
		opts.ClientAuthMethod != "" && opts.ClientSecret == "":
		return nil, fmt.Errorf("portal: demo client auth method %q (with a secret: client_secret_basic or client_secret_post)", opts.ClientAuthMethod)
	}
	switch opts.Pages.Style {
	case StyleDemo, StyleOIDCProvider, StyleDex:
	default:
		return nil, fmt.Errorf("portal: demo page style %q (want %q, %q or %q)", opts.Pages.Style, StyleDemo, StyleOIDCProvider, StyleDex)
	}
	if opts.Pages.RejectStatus == 0 {
		opts.Pages.RejectStatus = http.StatusOK
		if opts.Pages.Style == StyleDex {
			opts.Pages.RejectStatus = http.StatusUnauthorized
		}
	}
	if opts.ScopesSupported == nil {
		opts.ScopesSupported = []string{"openid", "launch/patient", "patient/*.read", "user/*.read", "offline_access"}
		if opts.PermissionV2 {
			opts.ScopesSupported = append(opts.ScopesSupported, "patient/*.rs", "user/*.rs")
		}
	}
	if opts.Failures.RetryAfter <= 0 {
		opts.Failures.RetryAfter = time.Second
	}
	d := &Portal{opts: opts, now: opts.Now, byRef: map[string]*resource{}, owner: map[string]string{},
		tokens: map[string]grant{}, txns: map[string]*txn{}, codes: map[string]*authCode{}, jtis: map[string]bool{}}
	if d.now == nil {
		d.now = time.Now
	}
	if err := d.makeCerts(); err != nil {
		return nil, err
	}
	for i := range opts.Patients {
		rec := generate(opts.Seed, i)
		d.records = append(d.records, rec)
		for k := range rec.Resources {
			r := &rec.Resources[k]
			key := r.Type + "/" + r.ID
			d.byRef[key] = r
			if r.Compartment {
				d.owner[key] = rec.ID
			}
		}
	}
	return d, nil
}

func (d *Portal) makeCerts() error {
	now := d.now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("portal: demo CA key: %w", err)
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
		return n
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "ACDS demo portal CA", Organization: []string{"ACDS demo"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("portal: demo CA certificate: %w", err)
	}
	d.caCert, _ = x509.ParseCertificate(caDER)
	d.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("portal: demo server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 3, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    append([]string{"localhost"}, d.opts.Hosts...),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, d.caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("portal: demo server certificate: %w", err)
	}
	d.cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return nil
}

// CACertPEM returns the PEM certificate of the portal's CA, which clients
// (and notaries) must trust.
func (d *Portal) CACertPEM() []byte { return slices.Clone(d.caPEM) }

// CertPool returns a pool holding only the portal's CA.
func (d *Portal) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(d.caCert)
	return p
}

// TLSConfig returns the server TLS configuration (TLS 1.2 and 1.3,
// HTTP/1.1), for callers that serve Handler themselves.
func (d *Portal) TLSConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{d.cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}

// Patients describes the demo patients in id order.
func (d *Portal) Patients() []PatientInfo {
	out := make([]PatientInfo, len(d.records))
	for i, r := range d.records {
		out[i] = PatientInfo{ID: r.ID, Name: r.Name, Resources: len(r.Resources), Bytes: r.Bytes}
		for _, res := range r.Resources {
			if res.Compartment {
				out[i].Compartment++
			}
		}
	}
	return out
}

// Resource returns the JSON of the resource ref ("Type/id") as the portal
// serves it, or nil when there is none.
func (d *Portal) Resource(ref string) []byte {
	if r := d.byRef[ref]; r != nil {
		return slices.Clone(r.JSON)
	}
	return nil
}

// Serve serves the portal over HTTPS on l until Close. It returns
// http.ErrServerClosed after Close, at once when Close came first.
func (d *Portal) Serve(l net.Listener) error {
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second, TLSConfig: d.TLSConfig(),
		ErrorLog: log.New(io.Discard, "", 0), IdleTimeout: time.Minute}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		l.Close()
		return http.ErrServerClosed
	}
	d.servers = append(d.servers, srv)
	d.mu.Unlock()
	return srv.ServeTLS(l, "", "")
}

// Close stops every Serve.
func (d *Portal) Close() error {
	d.mu.Lock()
	srvs := d.servers
	d.servers, d.closed = nil, true
	d.mu.Unlock()
	var errs []error
	for _, s := range srvs {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// Handler returns the portal's HTTP handler: the FHIR API under /fhir,
// the OAuth2 endpoints under /auth.
func (d *Portal) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fhir/.well-known/smart-configuration", d.smartConfig)
	mux.HandleFunc("GET /fhir/metadata", d.api(d.metadata, false))
	d.loginRoutes(mux)
	mux.HandleFunc("POST /auth/token", d.token)
	mux.HandleFunc("GET /fhir/Patient/{id}/{op}", d.api(d.everything, true))
	mux.HandleFunc("GET /fhir/{type}/{id}", d.api(d.read, true))
	mux.HandleFunc("GET /fhir/{type}", d.api(d.search, true))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeOutcome(w, http.StatusNotFound, "not-found", "no such endpoint")
	})
	return mux
}

// base is the FHIR base URL as the client addressed it.
func base(r *http.Request) string { return "https://" + r.Host + "/fhir" }

// issuer is the portal's OAuth2 issuer identifier.
func issuer(r *http.Request) string { return "https://" + r.Host + "/auth" }

func (d *Portal) smartConfig(w http.ResponseWriter, r *http.Request) {
	origin := "https://" + r.Host
	auth, client := []string{"none"}, "client-public"
	switch {
	case d.opts.ClientKey != nil:
		auth, client = []string{"private_key_jwt"}, "client-confidential-asymmetric"
	case d.opts.ClientSecret != "":
		auth, client = []string{"client_secret_basic", "client_secret_post"}, "client-confidential-symmetric"
	}
	grants := []string{"authorization_code", "password"}
	if d.opts.NoPasswordGrant {
		grants = grants[:1]
	}
	caps := []string{"launch-standalone", client, "context-standalone-patient", "permission-patient", "permission-user"}
	if d.opts.PermissionV2 {
		caps = append(caps, "permission-v2")
	}
	cfg := map[string]any{
		"issuer":                                issuer(r),
		"authorization_endpoint":                origin + "/auth/authorize",
		"token_endpoint":                        origin + "/auth/token",
		"grant_types_supported":                 grants,
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": auth,
		"scopes_supported":                      d.opts.ScopesSupported,
		"response_types_supported":              []string{"code"},
		"capabilities":                          caps,
	}
	if d.opts.IssParameter {
		cfg["authorization_response_iss_parameter_supported"] = true
	}
	writeJSON(w, http.StatusOK, cfg)
}

// checkScope returns the first scope of scope that the portal does not
// support, or "".
func (d *Portal) checkScope(scope string) string {
	for _, s := range strings.Fields(scope) {
		if !slices.Contains(d.opts.ScopesSupported, s) {
			return s
		}
	}
	return ""
}

// readScope reports whether scope lets a token read the FHIR API.
func readScope(scope string) bool {
	return slices.ContainsFunc(strings.Fields(scope), func(s string) bool {
		return slices.Contains([]string{"patient/*.read", "patient/*.rs", "user/*.read", "user/*.rs"}, s)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

// writeOutcome answers with an OperationOutcome of one error issue.
func writeOutcome(w http.ResponseWriter, status int, issueCode, diag string, detailCodes ...string) {
	issue := map[string]any{"severity": "error", "code": issueCode, "diagnostics": diag}
	if len(detailCodes) > 0 {
		issue["details"] = map[string]any{"coding": []any{map[string]any{"system": "urn:acds:demo-portal:error", "code": detailCodes[0]}}}
	}
	b, _ := json.Marshal(map[string]any{"resourceType": "OperationOutcome", "issue": []any{issue}})
	w.Header().Set("Content-Type", "application/fhir+json")
	w.WriteHeader(status)
	w.Write(b)
}

// apiHandler is a FHIR API handler with the patient restriction of the
// caller's credentials ("" = none).
type apiHandler func(w http.ResponseWriter, r *http.Request, patient string)

// api wraps a FHIR API handler with the injected faults and, when auth,
// authentication.
func (d *Portal) api(h apiHandler, auth bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f := d.opts.Failures
		d.mu.Lock()
		d.apiCalls++
		n := d.apiCalls
		d.mu.Unlock()
		if f.Slow > 0 {
			t := time.NewTimer(f.Slow)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				// Abort, not return: a handler that returns without
				// writing answers 200 with an empty body, which a client
				// whose connection is still open would read as a
				// truncated page instead of a portal that never answered.
				panic(http.ErrAbortHandler)
			}
		}
		if n <= f.RateLimited {
			w.Header().Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
			writeOutcome(w, http.StatusTooManyRequests, "throttled", "too many requests")
			return
		}
		if f.ServerErrors < 0 || n-f.RateLimited <= f.ServerErrors {
			writeOutcome(w, http.StatusServiceUnavailable, "transient", "the portal is temporarily unavailable")
			return
		}
		patient := ""
		if auth {
			var ok bool
			if patient, ok = d.authenticate(w, r); !ok {
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, patient)
	}
}

// authenticate checks Basic or Bearer credentials and answers 401 when
// they fail.
func (d *Portal) authenticate(w http.ResponseWriter, r *http.Request) (patient string, ok bool) {
	h := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(h, "Bearer "):
		tok := strings.TrimPrefix(h, "Bearer ")
		d.mu.Lock()
		g, found := d.tokens[tok]
		d.mu.Unlock()
		if !found || d.now().After(g.expires) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			writeOutcome(w, http.StatusUnauthorized, "login", "invalid or expired access token")
			return "", false
		}
		if !g.read {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope"`)
			writeOutcome(w, http.StatusForbidden, "forbidden", "the token's scope does not allow reading")
			return "", false
		}
		if !g.only {
			return "", true
		}
		return g.patient, true
	case strings.HasPrefix(h, "Basic "):
		user, pass, _ := r.BasicAuth()
		w.Header().Set("WWW-Authenticate", `Basic realm="ACDS demo portal"`)
		switch d.checkLogin(user, pass) {
		case loginOK:
			w.Header().Del("WWW-Authenticate")
			return "", true
		case loginLocked:
			writeOutcome(w, http.StatusUnauthorized, "lock-error", "the account is locked", "account-locked")
		case loginMFA:
			writeOutcome(w, http.StatusUnauthorized, "login", "a second factor is required", "mfa-required")
		default:
			writeOutcome(w, http.StatusUnauthorized, "login", "invalid username or password")
		}
		return "", false
	default:
		w.Header().Set("WWW-Authenticate", `Basic realm="ACDS demo portal", Bearer`)
		writeOutcome(w, http.StatusUnauthorized, "login", "authentication required")
		return "", false
	}
}

type loginResult int

const (
	loginBad loginResult = iota
	loginOK
	loginLocked
	loginMFA
)

func (d *Portal) checkLogin(user, pass string) loginResult {
	okUser := subtle.ConstantTimeCompare([]byte(user), []byte(d.opts.Username)) == 1
	okPass := subtle.ConstantTimeCompare([]byte(pass), []byte(d.opts.Password)) == 1
	f := d.opts.Failures
	switch {
	case !okUser || !okPass || f.RejectPassword:
		return loginBad
	case f.Locked:
		return loginLocked
	case f.MFA:
		return loginMFA
	}
	return loginOK
}

// searchParams are the demo portal's search parameters by type, each
// with the element of the resource it matches: the patient's reference
// for the compartment parameters the R4 specification gives these types
// (the generator puts the patient in "subject" or "patient"), another
// element for the others, and "_id" for ids.
var searchParams = map[string]map[string]string{
	"Patient":            {"_id": "id"},
	"Encounter":          {"patient": "subject", "subject": "subject", "participant": "participant", "_id": "id"},
	"Condition":          {"patient": "subject", "subject": "subject", "asserter": "asserter", "_id": "id"},
	"Observation":        {"patient": "subject", "subject": "subject", "performer": "performer", "_id": "id"},
	"MedicationRequest":  {"patient": "subject", "subject": "subject", "requester": "requester", "_id": "id"},
	"Immunization":       {"patient": "patient", "performer": "performer", "_id": "id"},
	"AllergyIntolerance": {"patient": "patient", "recorder": "recorder", "asserter": "asserter", "_id": "id"},
	"Procedure":          {"patient": "subject", "subject": "subject", "performer": "performer", "_id": "id"},
	"Medication":         {"_id": "id"},
	"Practitioner":       {"_id": "id"},
	"Organization":       {"_id": "id"},
}

// searchable reports whether the portal searches typ.
func (d *Portal) searchable(typ string) bool {
	return searchParams[typ] != nil && !slices.Contains(d.opts.Failures.UnsupportedTypes, typ)
}

func (d *Portal) metadata(w http.ResponseWriter, r *http.Request, _ string) {
	if d.opts.Failures.NoCapabilityStatement {
		writeOutcome(w, http.StatusNotFound, "not-found", "no such endpoint")
		return
	}
	types := make([]string, 0, len(searchParams))
	for t := range searchParams {
		types = append(types, t)
	}
	slices.Sort(types)
	var res []any
	for _, t := range types {
		if !d.searchable(t) {
			continue
		}
		names := make([]string, 0, len(searchParams[t]))
		for p := range searchParams[t] {
			names = append(names, p)
		}
		slices.Sort(names)
		var params []any
		for _, p := range names {
			typ := "reference"
			if p == "_id" {
				typ = "token"
			}
			params = append(params, map[string]any{"name": p, "type": typ})
		}
		entry := map[string]any{"type": t, "interaction": []any{map[string]any{"code": "read"}, map[string]any{"code": "search-type"}}, "searchParam": params}
		if t == "Patient" && !d.opts.Failures.NoEverything {
			entry["operation"] = []any{map[string]any{"name": "everything", "definition": "http://hl7.org/fhir/OperationDefinition/Patient-everything"}}
		}
		res = append(res, entry)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"resourceType": "CapabilityStatement", "status": "active", "date": "2026-01-15", "kind": "instance",
		"fhirVersion": "4.0.1", "format": []string{"json"},
		"rest": []any{map[string]any{"mode": "server", "resource": res}},
	})
}

// page writes entries [offset, offset+count) of rs as a searchset Bundle
// with self and next links built from self.
func (d *Portal) page(w http.ResponseWriter, r *http.Request, rs []*resource, include func(*resource) bool) {
	q := r.URL.Query()
	count := d.opts.PageSize
	if c, err := strconv.Atoi(q.Get("_count")); err == nil && c > 0 && c < count {
		count = c
	}
	offset, _ := strconv.Atoi(q.Get("_offset"))
	if offset < 0 || offset > len(rs) {
		writeOutcome(w, http.StatusBadRequest, "invalid", "bad _offset")
		return
	}
	end := min(len(rs), offset+count)
	var b strings.Builder
	selfURL := base(r) + strings.TrimPrefix(r.URL.Path, "/fhir")
	link := func(off int) string {
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = v
		}
		q2.Set("_offset", strconv.Itoa(off))
		q2.Set("_count", strconv.Itoa(count))
		return selfURL + "?" + q2.Encode()
	}
	fmt.Fprintf(&b, `{"resourceType":"Bundle","type":"searchset","total":%d,"link":[{"relation":"self","url":%q}`, len(rs), link(offset))
	if end < len(rs) {
		next := link(end)
		if d.opts.Failures.ForeignNext {
			next = strings.Replace(next, "https://"+r.Host+"/", "https://elsewhere.example/", 1)
		}
		fmt.Fprintf(&b, `,{"relation":"next","url":%q}`, next)
	}
	b.WriteString(`],"entry":[`)
	for i, res := range rs[offset:end] {
		if i > 0 {
			b.WriteByte(',')
		}
		mode := "match"
		if include != nil && include(res) {
			mode = "include"
		}
		fmt.Fprintf(&b, `{"fullUrl":%q,"resource":%s,"search":{"mode":%q}}`, base(r)+"/"+res.Type+"/"+res.ID, res.JSON, mode)
	}
	b.WriteString(`]}`)
	body := b.String()
	if d.opts.Failures.TruncatePages {
		body = body[:len(body)/2]
	}
	w.Header().Set("Content-Type", "application/fhir+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write([]byte(body))
}

func (d *Portal) record(id string) *record {
	for _, rec := range d.records {
		if rec.ID == id {
			return rec
		}
	}
	return nil
}

func (d *Portal) everything(w http.ResponseWriter, r *http.Request, patient string) {
	if r.PathValue("op") != "$everything" || d.opts.Failures.NoEverything {
		writeOutcome(w, http.StatusNotFound, "not-supported", "unknown operation "+strconv.Quote(r.PathValue("op")))
		return
	}
	id := r.PathValue("id")
	rec := d.record(id)
	if rec == nil || (patient != "" && patient != id) {
		writeOutcome(w, http.StatusNotFound, "not-found", "Patient/"+id+" is not known")
		return
	}
	rs := make([]*resource, len(rec.Resources))
	for i := range rec.Resources {
		rs[i] = &rec.Resources[i]
	}
	d.page(w, r, rs, func(res *resource) bool { return !res.Compartment })
}

func (d *Portal) read(w http.ResponseWriter, r *http.Request, patient string) {
	key := r.PathValue("type") + "/" + r.PathValue("id")
	res, ok := d.byRef[key]
	if owner, inCompartment := d.owner[key]; !ok || (inCompartment && patient != "" && owner != patient) {
		writeOutcome(w, http.StatusNotFound, "not-found", key+" is not known")
		return
	}
	w.Header().Set("Content-Type", "application/fhir+json")
	w.Write(res.JSON)
}

// search answers a search by the type's parameters (searchParams) and
// _count and _offset: every parameter must match. A reference parameter
// matches the resources whose element refers to the value, given as
// Patient/{id} (or as the bare id, unless BareIDBlind); _id matches ids.
// An unknown type is 404, an unknown parameter 400, as strict servers
// answer.
func (d *Portal) search(w http.ResponseWriter, r *http.Request, patient string) {
	typ := r.PathValue("type")
	f := d.opts.Failures
	if !d.searchable(typ) {
		writeOutcome(w, http.StatusNotFound, "not-supported", "unknown resource type "+strconv.Quote(typ))
		return
	}
	if typ == f.FailSearch {
		status := f.FailStatus
		if status == 0 {
			status = http.StatusInternalServerError
		}
		writeOutcome(w, status, "exception", "the search failed")
		return
	}
	type match struct{ field, value string }
	var want []match
	for k, vs := range r.URL.Query() {
		if k == "_count" || k == "_offset" {
			continue
		}
		if f.IgnoreSearchParams {
			continue
		}
		field, ok := searchParams[typ][k]
		if !ok {
			writeOutcome(w, http.StatusBadRequest, "not-supported", "unknown search parameter "+strconv.Quote(k)+" for "+typ)
			return
		}
		for _, v := range vs {
			want = append(want, match{field, v})
		}
	}
	if len(want) == 0 && !f.IgnoreSearchParams {
		writeOutcome(w, http.StatusBadRequest, "required", "the demo portal searches by a parameter")
		return
	}
	var rs []*resource
	for _, rec := range d.records {
		if patient != "" && rec.ID != patient {
			continue // the token reads only its patient
		}
		for k := range rec.Resources {
			res := &rec.Resources[k]
			if res.Type != typ {
				continue
			}
			ok := true
			for _, m := range want {
				ok = ok && d.matches(rec.ID, res, m.field, m.value)
			}
			if ok {
				rs = append(rs, res)
			}
		}
	}
	d.page(w, r, rs, nil)
}

// matches reports whether the element field of res, a resource of the
// patient owner's record, has the value v.
func (d *Portal) matches(owner string, res *resource, field, v string) bool {
	if field == "id" {
		return res.ID == v
	}
	id, typed := strings.CutPrefix(v, "Patient/")
	if !typed && d.opts.Failures.BareIDBlind {
		return false
	}
	// Only the patient's own reference names a Patient; the other
	// reference elements of the demo's resources name practitioners.
	return res.PatientField == field && owner == id
}

// randToken returns n random bytes in base64url.
func randToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// clientAuth authenticates the client of a token request as the
// registration wants, and says how it did; ok is false once it answered
// the refusal.
func (d *Portal) clientAuth(w http.ResponseWriter, r *http.Request) (method string, ok bool) {
	f := r.PostForm
	user, pass, basic := r.BasicAuth()
	if basic {
		u, err1 := url.QueryUnescape(user)
		p, err2 := url.QueryUnescape(pass)
		if err1 != nil || err2 != nil {
			oauthError(w, http.StatusUnauthorized, "invalid_client", "malformed HTTP Basic client credentials")
			return "", false
		}
		user, pass = u, p
	}
	id := f.Get("client_id")
	switch {
	case basic && f.Has("client_secret"):
		oauthError(w, http.StatusBadRequest, "invalid_request", "client authentication must use one method")
		return "", false
	case basic && id != "" && id != user:
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client_id and the Basic client credentials differ")
		return "", false
	case basic:
		id, method = user, "client_secret_basic"
	case f.Has("client_secret"):
		method = "client_secret_post"
	case f.Has("client_assertion"):
		method = "private_key_jwt"
	default:
		method = "none"
	}
	if id != d.opts.ClientID {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client")
		return method, false
	}
	switch {
	case d.opts.ClientKey != nil:
		if f.Get("client_assertion_type") != portal.ClientAssertionType {
			oauthError(w, http.StatusUnauthorized, "invalid_client", "private_key_jwt client authentication required")
			return method, false
		}
		jti, err := verifyAssertion(f.Get("client_assertion"), d.opts.ClientKey, d.opts.ClientID, "https://"+r.Host+"/auth/token", d.now())
		d.mu.Lock()
		reused := d.jtis[jti]
		if err == nil {
			d.jtis[jti] = true
		}
		d.mu.Unlock()
		if err != nil || reused {
			oauthError(w, http.StatusUnauthorized, "invalid_client", "client assertion refused")
			return method, false
		}
	case d.opts.ClientSecret != "":
		secret := f.Get("client_secret")
		if basic {
			secret = pass
		}
		if method != d.opts.ClientAuthMethod {
			oauthError(w, http.StatusUnauthorized, "invalid_client", d.opts.ClientAuthMethod+" client authentication required")
			return method, false
		}
		if subtle.ConstantTimeCompare([]byte(secret), []byte(d.opts.ClientSecret)) != 1 {
			oauthError(w, http.StatusUnauthorized, "invalid_client", "wrong client secret")
			return method, false
		}
	}
	return method, true
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (d *Portal) token(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw, status: http.StatusOK}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	f := r.PostForm
	entry := TokenRequest{GrantType: f.Get("grant_type"), Scope: f.Get("scope")}
	defer func() {
		entry.Status = w.status
		d.mu.Lock()
		d.tokenLog = append(d.tokenLog, entry)
		d.mu.Unlock()
	}()
	method, ok := d.clientAuth(w, r)
	entry.ClientAuth = method
	if !ok {
		return
	}
	var g grant
	scope := f.Get("scope")
	switch f.Get("grant_type") {
	case "password":
		if d.opts.NoPasswordGrant {
			oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code")
			return
		}
		if bad := d.checkScope(scope); bad != "" {
			oauthError(w, http.StatusBadRequest, "invalid_scope", "unsupported scope "+bad)
			return
		}
		switch d.checkLogin(f.Get("username"), f.Get("password")) {
		case loginOK:
			g.patient = d.records[0].ID
		case loginLocked:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "account locked")
			return
		case loginMFA:
			oauthError(w, http.StatusForbidden, "mfa_required", "multifactor authentication required")
			return
		default:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "invalid username or password")
			return
		}
	case "authorization_code":
		d.mu.Lock()
		c := d.codes[f.Get("code")]
		delete(d.codes, f.Get("code")) // one use, even when the exchange fails
		d.mu.Unlock()
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if c == nil || d.now().After(c.expires) || c.clientID != d.opts.ClientID || c.redirect != f.Get("redirect_uri") ||
			subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(c.chall)) != 1 {
			oauthError(w, http.StatusBadRequest, "invalid_grant", "invalid, expired or used code, or wrong code_verifier")
			return
		}
		g.patient, g.only, scope = c.patient, true, c.scope
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be password or authorization_code")
		return
	}
	if scope == "" {
		scope = strings.Join(d.opts.ScopesSupported, " ")
	}
	entry.Scope = scope
	g.read = readScope(scope)
	g.expires = d.now().Add(time.Hour)
	tok := randToken(32)
	d.mu.Lock()
	d.tokens[tok] = g
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "scope": scope, "patient": g.patient})
}
