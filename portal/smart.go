package portal

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// smartConfig is the part of .well-known/smart-configuration (RFC 8414
// metadata with SMART's additions) used here.
type smartConfig struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
	GrantTypes            []string `json:"grant_types_supported"`
	ResponseTypes         []string `json:"response_types_supported"`
	TokenAuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	Scopes                []string `json:"scopes_supported"`
	Capabilities          []string `json:"capabilities"`
	// IssParameter says the authorization response carries iss (RFC 9207).
	IssParameter bool `json:"authorization_response_iss_parameter_supported"`
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

// grants are the grant types the portal supports: grant_types_supported,
// or RFC 8414's default (authorization_code and implicit) when it has none.
func (sc *smartConfig) grants() []string {
	if len(sc.GrantTypes) == 0 {
		return []string{"authorization_code", "implicit"}
	}
	return sc.GrantTypes
}

// checkCodeFlow refuses, before any request, a portal whose discovery
// document says it cannot run the authorization code flow with PKCE S256.
func (sc *smartConfig) checkCodeFlow() error {
	const op = "SMART discovery"
	switch {
	case sc.AuthorizationEndpoint == "":
		return &Error{Kind: ErrUnsupported, Op: op, Detail: "no authorization endpoint: the portal has no login form flow (smart-form)"}
	case !slices.Contains(sc.grants(), "authorization_code"):
		return &Error{Kind: ErrUnsupported, Op: op, Detail: "grant_types_supported lacks authorization_code: the portal has no login form flow (smart-form)"}
	case len(sc.ResponseTypes) > 0 && !slices.Contains(sc.ResponseTypes, "code"):
		return &Error{Kind: ErrUnsupported, Op: op, Detail: "response_types_supported lacks code"}
	case len(sc.CodeChallengeMethods) > 0 && !slices.Contains(sc.CodeChallengeMethods, "S256"):
		return &Error{Kind: ErrUnsupported, Op: op, Detail: "the portal does not support PKCE S256"}
	case sc.IssParameter && sc.Issuer == "":
		return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "authorization_response_iss_parameter_supported without an issuer"}
	}
	return nil
}

// DefaultScope is the scope of a Registration that names none.
const DefaultScope = "openid launch/patient patient/*.read"

// smartV2 is the SMART v2 form of a SMART v1 resource scope
// ("patient/*.read" → "patient/*.rs"), or "" when s is not one.
func smartV2(s string) string {
	ctx, rest, ok := strings.Cut(s, "/")
	if !ok || (ctx != "patient" && ctx != "user" && ctx != "system") {
		return ""
	}
	typ, perm, ok := strings.Cut(rest, ".")
	if !ok || typ == "" {
		return ""
	}
	v2, ok := map[string]string{"read": "rs", "write": "cud", "*": "cruds"}[perm]
	if !ok {
		return ""
	}
	return ctx + "/" + typ + "." + v2
}

// negotiateScopes is the scope to ask for: each of the registration's
// scopes that the portal lists in scopes_supported (all of them when it
// lists none), in its SMART v2 form where the portal advertises
// permission-v2 and lists (or does not restrict) that form. None left is
// ErrUnsupported.
func negotiateScopes(reg Registration, sc *smartConfig) ([]string, error) {
	v2 := slices.Contains(sc.Capabilities, "permission-v2")
	supported := func(s string) bool { return len(sc.Scopes) == 0 || slices.Contains(sc.Scopes, s) }
	var out []string
	for _, s := range strings.Fields(reg.Scope) {
		cands := []string{s}
		if w := smartV2(s); v2 && w != "" {
			cands = []string{w, s}
		}
		for _, c := range cands {
			if supported(c) {
				if !slices.Contains(out, c) {
					out = append(out, c)
				}
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, &Error{Kind: ErrUnsupported, Op: "SMART discovery",
			Detail: fmt.Sprintf("none of the registration's scopes (%s) is in the portal's scopes_supported", reg.Scope)}
	}
	return out, nil
}

// Client authentication methods at the token endpoint (RFC 8414, RFC 7523).
const (
	authNone          = "none"
	authSecretBasic   = "client_secret_basic"
	authSecretPost    = "client_secret_post"
	authPrivateKeyJWT = "private_key_jwt"
)

// clientAuth chooses how the client authenticates at the token endpoint:
// the registration says what it holds (a key, a secret or nothing) and,
// in AuthMethod, how it is registered, and the portal's
// token_endpoint_auth_methods_supported which of the methods for it the
// portal takes — for a secret client_secret_basic first, then
// client_secret_post. Without the list, a key is private_key_jwt and a
// secret client_secret_basic (RFC 8414's default). A public client sends
// its client_id whatever the list says, as portals that serve public
// clients without listing "none" expect. No method both take is
// ErrUnsupported.
func (s *session) clientAuth(reg Registration, sc *smartConfig) (string, error) {
	listed := func(m string) bool { return len(sc.TokenAuthMethods) == 0 || slices.Contains(sc.TokenAuthMethods, m) }
	var cands []string
	switch {
	case reg.Key != nil:
		cands = []string{authPrivateKeyJWT}
	case reg.ClientSecret != "" && reg.AuthMethod != "":
		cands = []string{reg.AuthMethod}
	case reg.ClientSecret != "":
		cands = []string{authSecretBasic, authSecretPost}
	default:
		return authNone, nil
	}
	for i, m := range cands {
		// client_secret_post, a fallback, only where the portal lists it.
		if listed(m) && (i == 0 || slices.Contains(sc.TokenAuthMethods, m)) {
			return m, nil
		}
	}
	return "", &Error{Kind: ErrUnsupported, Op: "SMART discovery",
		Detail: s.red.detail(fmt.Sprintf("the client authenticates with %s; token_endpoint_auth_methods_supported lists only %s",
			strings.Join(cands, " or "), strings.Join(sc.TokenAuthMethods, ", ")))}
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
		r.Scope = DefaultScope
	}
	if r.ClientSecret != "" {
		s.red = append(s.red, newRedactor(r.ClientSecret, basicCredentials(r.ClientID, r.ClientSecret))...)
	}
	return r
}

// basicCredentials is the value of an HTTP Basic Authorization header for
// an OAuth2 client (RFC 6749 §2.3.1: each part form-encoded first), which
// text echoed by a portal could quote.
func basicCredentials(id, secret string) string {
	return base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id) + ":" + url.QueryEscape(secret)))
}

// oauthClient is the registration's OAuth2 client at the portal: the
// x/oauth2 configuration with the negotiated scopes, and how the client
// authenticates at the token endpoint.
type oauthClient struct {
	reg    Registration
	sc     *smartConfig
	scopes []string
	auth   string // one of the auth* methods
}

// oauthClient makes the client for a flow: the client authentication and
// the scopes negotiated with the discovery document.
func (s *session) oauthClient(sc *smartConfig) (*oauthClient, error) {
	reg := s.registration()
	auth, err := s.clientAuth(reg, sc)
	if err != nil {
		return nil, err
	}
	scopes, err := negotiateScopes(reg, sc)
	if err != nil {
		return nil, err
	}
	return &oauthClient{reg: reg, sc: sc, scopes: scopes, auth: auth}, nil
}

// config is the x/oauth2 configuration of the client. Client
// authentication is left to tokenTransport, which x/oauth2 would not do
// for private_key_jwt, and whose requests are rebuilt for session.do.
func (oc *oauthClient) config() *oauth2.Config {
	return &oauth2.Config{
		ClientID: oc.reg.ClientID, RedirectURL: oc.reg.RedirectURI, Scopes: oc.scopes,
		Endpoint: oauth2.Endpoint{AuthURL: oc.sc.AuthorizationEndpoint, TokenURL: oc.sc.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams},
	}
}

// tokenTransport carries x/oauth2's token requests through the session:
// each is one exchange of session.do over the request's *http.Client, so
// the SSRF guard, the notarized transport, the retries and the byte
// limits apply to it as to every other exchange. It authenticates the
// client as oauthClient.auth says: the client_id alone (a public client),
// the private_key_jwt client assertion (RFC 7523), the secret in the body
// (client_secret_post) or in an HTTP Basic header (client_secret_basic,
// without client_id in the body).
type tokenTransport struct {
	s      *session
	op     string
	client *oauthClient
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
	reg, basic := t.client.reg, ""
	switch t.client.auth {
	case authPrivateKeyJWT:
		a, err := clientAssertion(reg.Key, reg.KeyID, reg.ClientID, t.client.sc.TokenEndpoint, time.Now(), t.s.c.rand())
		if err != nil {
			return nil, &Error{Kind: ErrInvalidRequest, Op: t.op, Err: err}
		}
		form.Set("client_assertion_type", ClientAssertionType)
		form.Set("client_assertion", a)
	case authSecretPost:
		form.Set("client_secret", reg.ClientSecret)
	case authSecretBasic:
		form.Del("client_id")
		basic = "Basic " + basicCredentials(reg.ClientID, reg.ClientSecret)
	}
	post := poster(req.URL.String(), form, "application/json")
	ex, err := t.s.do(req.Context(), t.op, false, func(ctx context.Context) (*http.Request, error) {
		r, err := post(ctx)
		if err == nil && basic != "" {
			r.Header.Set("Authorization", basic)
		}
		return r, err
	})
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
func (s *session) oauthContext(ctx context.Context, op string, client *oauthClient) context.Context {
	hc := &http.Client{
		Transport: &tokenTransport{s: s, op: op, client: client},
		// Redirects were followed (and checked) by session.do already.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return context.WithValue(ctx, oauth2.HTTPClient, hc)
}

// Token requests, for useToken's classification of their errors.
const (
	grantPassword = "password grant"
	grantCode     = "code exchange"
)

// useToken installs the bearer token of a token request's outcome, or
// classifies its failure by cause (tokenError). The error never quotes
// x/oauth2's text, which holds the portal's whole answer: only the OAuth2
// error code and description, redacted and capped.
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
		return s.tokenError(op, re)
	case err != nil || tok.AccessToken == "" || !strings.EqualFold(tok.TokenType, "bearer"):
		return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "no bearer token in the token response"}
	}
	at := tok.AccessToken
	s.red = append(s.red, at)
	s.patientContext, _ = tok.Extra("patient").(string)
	s.auth = func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+at) }
	return nil
}

// tokenError classifies a token endpoint's error answer by its cause:
// the user's credentials (invalid_grant on a password grant, access
// denied) are ErrAuthFailed; what the portal or the registration cannot
// do (unsupported_grant_type, invalid_scope, unauthorized_client,
// invalid_client, invalid_request) is ErrUnsupported; a second factor is
// ErrMFARequired; a portal that says it is failing is ErrUnavailable;
// anything else, including a code the portal refuses right after issuing
// it, is ErrResponseInvalid.
func (s *session) tokenError(op string, re *oauth2.RetrieveError) error {
	desc := strings.ToLower(re.ErrorDescription)
	e := &Error{Op: op, Status: re.Response.StatusCode, Detail: s.red.detail(strings.TrimSpace(re.ErrorCode + " " + re.ErrorDescription))}
	password := op == grantPassword
	switch re.ErrorCode {
	case "unsupported_grant_type", "invalid_scope", "unauthorized_client", "invalid_client", "invalid_request", "unsupported_response_type":
		e.Kind = ErrUnsupported
	case "temporarily_unavailable", "server_error":
		e.Kind = ErrUnavailable
	case "access_denied":
		e.Kind = ErrAuthFailed
	case "invalid_grant":
		switch {
		case strings.Contains(desc, "multifactor") || strings.Contains(desc, "multi-factor"):
			e.Kind = ErrMFARequired
		case !password:
			e.Kind = ErrResponseInvalid // the code it issued moments ago
		case strings.Contains(desc, "locked"):
			e.Kind, e.Err = ErrAuthFailed, ErrAccountLocked
		default:
			e.Kind = ErrAuthFailed
		}
	default:
		switch {
		case strings.Contains(re.ErrorCode, "mfa") || strings.Contains(desc, "multifactor") || strings.Contains(desc, "multi-factor"):
			e.Kind = ErrMFARequired
		case password && re.ErrorCode == "" && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden):
			e.Kind = ErrAuthFailed
		default:
			e.Kind = ErrResponseInvalid
		}
	}
	return e
}

// passwordGrant runs smart-password: discovery, then the OAuth2
// resource owner password grant — unless the discovery document does not
// list that grant, when the password is never sent.
func (s *session) passwordGrant(ctx context.Context) error {
	sc, err := s.discover(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(sc.grants(), "password") {
		return &Error{Kind: ErrUnsupported, Op: "SMART discovery",
			Detail: "grant_types_supported lacks password: the portal does not take the password grant (smart-password); the password was not sent"}
	}
	client, err := s.oauthClient(sc)
	if err != nil {
		return err
	}
	tok, err := client.config().PasswordCredentialsToken(s.oauthContext(ctx, grantPassword, client), s.creds.Username, s.creds.Password)
	return s.useToken(grantPassword, tok, err)
}

func (s *session) random(n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(s.c.rand(), b); err != nil {
		return "", &Error{Kind: ErrUnavailable, Op: "random", Err: err}
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// authorizationError classifies the error of an authorization response
// (RFC 6749 §4.1.2.1, OpenID Connect Core §3.1.2.6) by its cause.
func (s *session) authorizationError(code, desc string) error {
	e := &Error{Op: "authorization", Detail: s.red.detail(strings.TrimSpace(code + " " + desc))}
	switch {
	case code == "access_denied":
		e.Kind = ErrAuthFailed
	case strings.Contains(code, "mfa"):
		e.Kind = ErrMFARequired
	case code == "server_error" || code == "temporarily_unavailable":
		e.Kind = ErrUnavailable
	case slices.Contains([]string{"invalid_request", "unauthorized_client", "unsupported_response_type", "invalid_scope",
		"invalid_client", "interaction_required", "login_required", "consent_required", "account_selection_required",
		"invalid_request_uri", "invalid_request_object", "request_not_supported", "request_uri_not_supported",
		"registration_not_supported", "invalid_target"}, code):
		e.Kind = ErrUnsupported
	default:
		e.Kind = ErrResponseInvalid
	}
	return e
}

// finishForm takes the intercepted redirect to the registered redirect
// URI: its state, its iss (RFC 9207) when the portal says it sends one or
// sends one anyway, its error or its code, which it exchanges.
func (s *session) finishForm(ctx context.Context, ex *exchange, client *oauthClient, state, verifier string) error {
	reg, sc := client.reg, client.sc
	loc, err := ex.url.Parse(ex.header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), reg.RedirectURI) {
		return &Error{Kind: ErrResponseInvalid, Op: "authorization", Detail: "redirect to an unexpected location"}
	}
	q := loc.Query()
	if q.Get("state") != state {
		return &Error{Kind: ErrResponseInvalid, Op: "authorization", Detail: "state mismatch"}
	}
	switch iss, has := q["iss"]; {
	case sc.IssParameter && !has:
		return &Error{Kind: ErrResponseInvalid, Op: "authorization", Detail: "no iss in the authorization response, although the portal says it sends one (RFC 9207)"}
	case has && sc.Issuer != "" && (len(iss) != 1 || iss[0] != sc.Issuer):
		return &Error{Kind: ErrResponseInvalid, Op: "authorization",
			Detail: s.red.detail(fmt.Sprintf("the authorization response's iss %q is not the portal's issuer %q (RFC 9207); refused", strings.Join(iss, ","), sc.Issuer))}
	}
	if e := q.Get("error"); e != "" {
		return s.authorizationError(e, q.Get("error_description"))
	}
	code := q.Get("code")
	if code == "" {
		return &Error{Kind: ErrResponseInvalid, Op: "authorization", Detail: "no code"}
	}
	s.red = append(s.red, code)
	tok, err := client.config().Exchange(s.oauthContext(ctx, grantCode, client), code, oauth2.VerifierOption(verifier))
	return s.useToken(grantCode, tok, err)
}
