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
	"strings"
	"time"

	"golang.org/x/oauth2"
)

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
