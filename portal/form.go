package portal

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/oauth2"
)

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
