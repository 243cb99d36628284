package portal_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// fetchAs fetches patient 0 of p with systemType st and the demo login,
// through conn (testConnector when nil).
func fetchAs(t *testing.T, p *testPortal, conn *portal.Connector, st, recordID string, creds portal.Credentials) (*portal.Record, error) {
	t.Helper()
	if conn == nil {
		conn = testConnector()
	}
	return conn.Fetch(context.Background(), p.client, portal.Request{SystemType: st, PortalURL: p.Base, RecordID: recordID, Credentials: creds})
}

// wantProblem checks an error's class and problem code, and that it does
// not quote the password.
func wantProblem(t *testing.T, what string, err error, class error, code string) {
	t.Helper()
	if !errors.Is(err, class) || portal.ProblemCode(err) != code {
		t.Errorf("%s: %v (problem %q), want %q", what, err, portal.ProblemCode(err), code)
	}
	if err != nil && strings.Contains(err.Error(), demoportal.Password) {
		t.Errorf("%s: the error quotes the password: %v", what, err)
	}
}

// TestLoginPagesAsProvidersDrawThem: smart-form signs in through login
// and consent pages drawn as node-oidc-provider and Dex draw them, with
// and without a sign-in chooser in front, for the patient the consent
// names (recordId "") or the one asked for; a wrong password, a locked
// account and a second factor are told apart on each, whatever status
// the re-rendered login comes with.
func TestLoginPagesAsProvidersDrawThem(t *testing.T) {
	for _, style := range []string{demoportal.StyleDemo, demoportal.StyleOIDCProvider, demoportal.StyleDex} {
		for _, chooser := range []bool{false, true} {
			name := fmt.Sprintf("%s/chooser=%v", style, chooser)
			if style == "" {
				name = "demo" + name
			}
			t.Run(name, func(t *testing.T) {
				pages := demoportal.Pages{Style: style, Chooser: chooser}
				p := startDemo(t, demoportal.Options{Patients: 2, Pages: pages})
				want := p.Patients()[0]
				for _, id := range []string{"", want.ID} {
					rec, err := fetchAs(t, p, nil, acds.SystemSMARTForm, id, demoCreds)
					if err != nil {
						t.Fatalf("recordId %q: %v", id, err)
					}
					if rec.Resources != want.Resources {
						t.Errorf("recordId %q: %d resources, want %d", id, rec.Resources, want.Resources)
					}
				}
				wrong := portal.Credentials{Username: demoportal.Username, Password: "not-" + demoportal.Password}
				_, err := fetchAs(t, p, nil, acds.SystemSMARTForm, want.ID, wrong)
				wantProblem(t, "wrong password", err, portal.ErrAuthFailed, acds.ProblemPortalAuthFailed)
				if errors.Is(err, portal.ErrAccountLocked) {
					t.Errorf("wrong password: %v says locked", err)
				}
				for _, f := range []demoportal.Failures{{Locked: true}, {MFA: true}} {
					q := startDemo(t, demoportal.Options{Patients: 1, Pages: pages, Failures: f})
					_, err := fetchAs(t, q, nil, acds.SystemSMARTForm, "", demoCreds)
					if f.Locked {
						wantProblem(t, "locked", err, portal.ErrAccountLocked, acds.ProblemPortalAuthFailed)
					} else {
						wantProblem(t, "mfa", err, portal.ErrMFARequired, acds.ProblemPortalMFARequired)
					}
				}
			})
		}
	}
}

// TestRerenderedLoginWithAnyStatus: a login page re-rendered after a
// wrong password is the user's credentials refused (portal-auth-failed),
// whether it comes back with 200, 400, 401 or 403.
func TestRerenderedLoginWithAnyStatus(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity} {
		p := startDemo(t, demoportal.Options{Patients: 1, Pages: demoportal.Pages{RejectStatus: status}})
		_, err := fetchAs(t, p, nil, acds.SystemSMARTForm, "", portal.Credentials{Username: "nobody", Password: "not-the-password"})
		wantProblem(t, fmt.Sprintf("HTTP %d", status), err, portal.ErrAuthFailed, acds.ProblemPortalAuthFailed)
		p = startDemo(t, demoportal.Options{Patients: 1, Pages: demoportal.Pages{RejectStatus: status}, Failures: demoportal.Failures{Locked: true}})
		_, err = fetchAs(t, p, nil, acds.SystemSMARTForm, "", demoCreds)
		wantProblem(t, fmt.Sprintf("locked, HTTP %d", status), err, portal.ErrAccountLocked, acds.ProblemPortalAuthFailed)
	}
}

// TestScriptOnlyLogin: a login page that only a script draws is
// portal-unsupported, saying a browser is needed, and no password is
// sent anywhere.
func TestScriptOnlyLogin(t *testing.T) {
	p := startDemo(t, demoportal.Options{Patients: 1, Pages: demoportal.Pages{ScriptOnly: true}})
	_, err := fetchAs(t, p, nil, acds.SystemSMARTForm, "", demoCreds)
	wantProblem(t, "script-only login", err, portal.ErrUnsupported, acds.ProblemPortalUnsupported)
	if err == nil || !strings.Contains(err.Error(), "browser") {
		t.Errorf("the error does not say a browser is needed: %v", err)
	}
	if n := len(p.TokenRequests()); n != 0 {
		t.Errorf("%d token requests", n)
	}
}

// TestScopesAsTheDiscoveryDocumentSays: the client asks for the
// registration's scopes that the portal lists, in their SMART v2 form
// where the portal advertises permission-v2; a portal that refuses the
// default launch/patient (as Dex does) still signs in, and a portal that
// lists none of them is portal-unsupported before anything is sent.
func TestScopesAsTheDiscoveryDocumentSays(t *testing.T) {
	for _, tc := range []struct {
		name      string
		supported []string
		v2        bool
		want      string // the scope the token endpoint saw
	}{
		{"no launch/patient", []string{"openid", "patient/*.read", "profile"}, false, "openid patient/*.read"},
		{"v2 only", []string{"openid", "launch/patient", "patient/*.rs"}, true, "openid launch/patient patient/*.rs"},
		{"v1 and v2, v2 advertised", []string{"openid", "launch/patient", "patient/*.read", "patient/*.rs"}, true, "openid launch/patient patient/*.rs"},
		{"v1 and v2, v2 not advertised", []string{"openid", "launch/patient", "patient/*.read", "patient/*.rs"}, false, "openid launch/patient patient/*.read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startDemo(t, demoportal.Options{Patients: 1, ScopesSupported: tc.supported, PermissionV2: tc.v2})
			for _, st := range []string{acds.SystemSMARTForm, acds.SystemSMARTPassword} {
				if _, err := fetchAs(t, p, nil, st, "", demoCreds); err != nil {
					t.Fatalf("%s: %v", st, err)
				}
				reqs := p.TokenRequests()
				if got := reqs[len(reqs)-1].Scope; got != tc.want {
					t.Errorf("%s: scope %q, want %q", st, got, tc.want)
				}
			}
		})
	}
	p := startDemo(t, demoportal.Options{Patients: 1, ScopesSupported: []string{"email", "groups"}})
	for _, st := range []string{acds.SystemSMARTForm, acds.SystemSMARTPassword} {
		_, err := fetchAs(t, p, nil, st, "", demoCreds)
		wantProblem(t, st+" with no common scope", err, portal.ErrUnsupported, acds.ProblemPortalUnsupported)
	}
	if n := len(p.TokenRequests()); n != 0 {
		t.Errorf("%d token requests to a portal with no common scope", n)
	}
}

// TestNoPasswordGrantAdvertised: smart-password against a portal whose
// grant_types_supported lacks the password grant is portal-unsupported,
// and the token endpoint never sees the password.
func TestNoPasswordGrantAdvertised(t *testing.T) {
	p := startDemo(t, demoportal.Options{Patients: 1, NoPasswordGrant: true})
	_, err := fetchAs(t, p, nil, acds.SystemSMARTPassword, "", demoCreds)
	wantProblem(t, "password grant", err, portal.ErrUnsupported, acds.ProblemPortalUnsupported)
	if reqs := p.TokenRequests(); len(reqs) != 0 {
		t.Errorf("the token endpoint saw %+v", reqs)
	}
	if _, err := fetchAs(t, p, nil, acds.SystemSMARTForm, "", demoCreds); err != nil {
		t.Errorf("smart-form on the same portal: %v", err)
	}
}

// writeSecret writes a client secret file of mode 0600.
func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClientSecretClients: a registration with a client secret (read from
// a registrations file) authenticates with client_secret_basic, or with
// the method it names (tokenEndpointAuthMethod) among those the portal's
// discovery document lists; a wrong secret, a method the portal did not
// register the client with, or a secret for a portal that takes only
// private_key_jwt, is portal-unsupported; the secret never appears in an
// error.
func TestClientSecretClients(t *testing.T) {
	const secret = "s3cr3t-CLIENT-9d2e"
	for _, method := range []string{"client_secret_basic", "client_secret_post"} {
		t.Run(method, func(t *testing.T) {
			p := startDemo(t, demoportal.Options{Patients: 1, ClientID: "acds-conf", ClientSecret: secret, ClientAuthMethod: method})
			origin := strings.TrimSuffix(p.Base, "/fhir")
			file := filepath.Join(t.TempDir(), "registrations.json")
			os.WriteFile(file, []byte(fmt.Sprintf(`[{"origin": %q, "clientId": "acds-conf", "redirectUri": %q, "clientSecretFile": %q, "tokenEndpointAuthMethod": %q}]`,
				origin, portal.DemoRedirectURI, writeSecret(t, secret), method)), 0o600)
			regs, err := portal.LoadRegistrations(file)
			if err != nil {
				t.Fatal(err)
			}
			conn := testConnector()
			conn.Registrations = regs
			for _, st := range []string{acds.SystemSMARTForm, acds.SystemSMARTPassword} {
				if _, err := fetchAs(t, p, conn, st, "", demoCreds); err != nil {
					t.Fatalf("%s: %v", st, err)
				}
				reqs := p.TokenRequests()
				if got := reqs[len(reqs)-1]; got.ClientAuth != method || got.Status != http.StatusOK {
					t.Errorf("%s: token request %+v, want %s", st, got, method)
				}
			}
			other := map[string]string{"client_secret_basic": "client_secret_post", "client_secret_post": "client_secret_basic"}[method]
			for name, reg := range map[string]portal.Registration{
				"a wrong secret":   {ClientID: "acds-conf", RedirectURI: portal.DemoRedirectURI, ClientSecret: "not-the-" + secret, AuthMethod: method},
				"the other method": {ClientID: "acds-conf", RedirectURI: portal.DemoRedirectURI, ClientSecret: secret, AuthMethod: other},
				"no public client": {ClientID: "acds-conf", RedirectURI: portal.DemoRedirectURI},
			} {
				wrong := testConnector()
				wrong.Registrations = map[string]portal.Registration{origin: reg}
				for _, st := range []string{acds.SystemSMARTForm, acds.SystemSMARTPassword} {
					_, err := fetchAs(t, p, wrong, st, "", demoCreds)
					wantProblem(t, st+" with "+name, err, portal.ErrUnsupported, acds.ProblemPortalUnsupported)
					if err != nil && strings.Contains(err.Error(), secret) {
						t.Errorf("the error quotes the secret: %v", err)
					}
				}
			}
		})
	}
	// A portal that takes only private_key_jwt: the secret is never sent.
	p := startDemo(t, demoportal.Options{Patients: 1, ClientKey: mustKey(t).Public()})
	conn := testConnector()
	conn.Registrations = map[string]portal.Registration{strings.TrimSuffix(p.Base, "/fhir"): {ClientID: portal.DemoClientID, RedirectURI: portal.DemoRedirectURI, ClientSecret: secret}}
	_, err := fetchAs(t, p, conn, acds.SystemSMARTPassword, "", demoCreds)
	wantProblem(t, "secret for a private_key_jwt portal", err, portal.ErrUnsupported, acds.ProblemPortalUnsupported)
	if n := len(p.TokenRequests()); n != 0 {
		t.Errorf("%d token requests", n)
	}
}

// TestIssParameter: with authorization_response_iss_parameter_supported
// the authorization response's iss is checked (RFC 9207); another
// issuer's is refused, and the code is never exchanged.
func TestIssParameter(t *testing.T) {
	p := startDemo(t, demoportal.Options{Patients: 1, IssParameter: true})
	if _, err := fetchAs(t, p, nil, acds.SystemSMARTForm, "", demoCreds); err != nil {
		t.Fatal(err)
	}
	p = startDemo(t, demoportal.Options{Patients: 1, IssParameter: true, Failures: demoportal.Failures{WrongIss: true}})
	_, err := fetchAs(t, p, nil, acds.SystemSMARTForm, "", demoCreds)
	wantProblem(t, "wrong iss", err, portal.ErrResponseInvalid, acds.ProblemPortalResponseInvalid)
	if err == nil || !strings.Contains(err.Error(), "iss") {
		t.Errorf("the error does not name iss: %v", err)
	}
	if n := len(p.TokenRequests()); n != 0 {
		t.Errorf("the code was exchanged (%d token requests)", n)
	}
}

// scriptedPortal is a portal whose every answer a test writes: SMART
// discovery (with extra JSON members), the authorization endpoint and
// the pages behind it. It counts the token requests.
type scriptedPortal struct {
	srv    *httptest.Server
	tokens atomic.Int32
}

func startScripted(t *testing.T, discovery string, pages func(w http.ResponseWriter, r *http.Request)) *scriptedPortal {
	t.Helper()
	sp := &scriptedPortal{}
	sp.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fhir/.well-known/smart-configuration":
			fmt.Fprintf(w, `{"issuer":"https://%[1]s","authorization_endpoint":"https://%[1]s/authorize","token_endpoint":"https://%[1]s/token"%[2]s}`, r.Host, discovery)
		case "/token":
			sp.tokens.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
		default:
			pages(w, r)
		}
	}))
	t.Cleanup(sp.srv.Close)
	return sp
}

func (sp *scriptedPortal) fetch(st string) error {
	_, err := testConnector().Fetch(context.Background(), sp.srv.Client(), portal.Request{SystemType: st, PortalURL: sp.srv.URL + "/fhir", RecordID: "p1", Credentials: demoCreds})
	return err
}

// redirectBack answers an authorization request with the redirect to the
// client carrying extra parameters.
func redirectBack(w http.ResponseWriter, r *http.Request, extra url.Values) {
	q := r.URL.Query()
	u, _ := url.Parse(q.Get("redirect_uri"))
	v := url.Values{"state": {q.Get("state")}}
	for k, vs := range extra {
		v[k] = vs
	}
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// TestErrorsByCause: each failure of the form flow and of discovery
// names its cause — the registration or the portal cannot do this
// (portal-unsupported), the portal answered nonsense
// (portal-response-invalid), the user was refused (portal-auth-failed).
func TestErrorsByCause(t *testing.T) {
	for _, tc := range []struct {
		name      string
		discovery string
		page      func(w http.ResponseWriter, r *http.Request)
		st        string
		class     error
		code      string
	}{
		{"invalid_scope in the authorization response", "", func(w http.ResponseWriter, r *http.Request) {
			redirectBack(w, r, url.Values{"error": {"invalid_scope"}, "error_description": {"launch/patient is not a scope here"}})
		}, acds.SystemSMARTForm, portal.ErrUnsupported, acds.ProblemPortalUnsupported},
		{"unauthorized_client in the authorization response", "", func(w http.ResponseWriter, r *http.Request) {
			redirectBack(w, r, url.Values{"error": {"unauthorized_client"}})
		}, acds.SystemSMARTForm, portal.ErrUnsupported, acds.ProblemPortalUnsupported},
		{"access_denied in the authorization response", "", func(w http.ResponseWriter, r *http.Request) {
			redirectBack(w, r, url.Values{"error": {"access_denied"}})
		}, acds.SystemSMARTForm, portal.ErrAuthFailed, acds.ProblemPortalAuthFailed},
		{"an error code nobody defined", "", func(w http.ResponseWriter, r *http.Request) {
			redirectBack(w, r, url.Values{"error": {"banana"}})
		}, acds.SystemSMARTForm, portal.ErrResponseInvalid, acds.ProblemPortalResponseInvalid},
		{"the authorization request refused on an error page", "", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `<html><body><h1>oops! something went wrong</h1><pre>error: invalid_redirect_uri</pre><pre>error_description: redirect_uri did not match any of the client's registered redirect_uris</pre></body></html>`)
		}, acds.SystemSMARTForm, portal.ErrUnsupported, acds.ProblemPortalUnsupported},
		{"an error page before the login", "", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<html><body>Not found</body></html>`)
		}, acds.SystemSMARTForm, portal.ErrResponseInvalid, acds.ProblemPortalResponseInvalid},
		{"no PKCE S256", `,"code_challenge_methods_supported":["plain"]`, nil, acds.SystemSMARTForm, portal.ErrUnsupported, acds.ProblemPortalUnsupported},
		{"no authorization code grant", `,"grant_types_supported":["password"]`, nil, acds.SystemSMARTForm, portal.ErrUnsupported, acds.ProblemPortalUnsupported},
		{"no grant types listed", ``, nil, acds.SystemSMARTPassword, portal.ErrUnsupported, acds.ProblemPortalUnsupported},
		{"iss advertised, none sent", `,"authorization_response_iss_parameter_supported":true`, func(w http.ResponseWriter, r *http.Request) {
			redirectBack(w, r, url.Values{"code": {"c1"}})
		}, acds.SystemSMARTForm, portal.ErrResponseInvalid, acds.ProblemPortalResponseInvalid},
		{"iss not advertised, another sent", ``, func(w http.ResponseWriter, r *http.Request) {
			redirectBack(w, r, url.Values{"code": {"c1"}, "iss": {"https://elsewhere.example"}})
		}, acds.SystemSMARTForm, portal.ErrResponseInvalid, acds.ProblemPortalResponseInvalid},
		{"private key only", `,"token_endpoint_auth_methods_supported":["private_key_jwt"],"grant_types_supported":["password"]`, nil,
			acds.SystemSMARTPassword, portal.ErrAuthFailed, acds.ProblemPortalAuthFailed}, // a public client still sends its client_id
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := tc.page
			if page == nil {
				page = func(w http.ResponseWriter, r *http.Request) { t.Errorf("the flow went on to %s", r.URL) }
			}
			sp := startScripted(t, tc.discovery, page)
			err := sp.fetch(tc.st)
			wantProblem(t, tc.name, err, tc.class, tc.code)
			if tc.class != portal.ErrAuthFailed && sp.tokens.Load() != 0 {
				t.Errorf("%d token requests", sp.tokens.Load())
			}
		})
	}
}

// TestSignInChoosers: a chooser is followed to its one link that leads
// to a password login; with none, or with several, the error says so
// (portal-unsupported) and names the choices.
func TestSignInChoosers(t *testing.T) {
	login := `<form method="post" action="/login"><input name="email" type="email"><input type="password" name="pw"><button>Sign in</button></form>`
	for _, tc := range []struct {
		name    string
		links   string
		class   error
		mention string
	}{
		{"one password login", `<a href="/idp/github">GitHub</a><a href="/idp/local">Email</a><a href="https://elsewhere.example/x">Elsewhere</a>`, portal.ErrAuthFailed, ""},
		{"none", `<a href="/idp/github">GitHub</a><a href="/idp/saml">Company SSO</a>`, portal.ErrUnsupported, "GitHub; Company SSO"},
		{"two", `<a href="/idp/local">Email</a><a href="/idp/ldap">Directory</a><a href="/idp/github">GitHub</a>`, portal.ErrUnsupported, "more than one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var offOrigin atomic.Int32
			sp := startScripted(t, `,"grant_types_supported":["authorization_code"]`, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/authorize":
					fmt.Fprintf(w, `<html><body><h2>Log in</h2>%s<a href="/help">Help</a></body></html>`, tc.links)
				case "/idp/local", "/idp/ldap":
					fmt.Fprint(w, login)
				case "/idp/github":
					http.Redirect(w, r, "https://github.example/login", http.StatusFound)
				case "/idp/saml":
					fmt.Fprint(w, `<form method="post" action="https://sso.example/saml"><input type="hidden" name="SAMLRequest" value="x"></form><script>document.forms[0].submit()</script>`)
				case "/login":
					// The password arrived: re-render the login.
					w.WriteHeader(http.StatusUnauthorized)
					fmt.Fprint(w, `<p class="error">Wrong password</p>`+login)
				case "/help":
					t.Error("the help link was followed")
				default:
					offOrigin.Add(1)
				}
			})
			err := sp.fetch(acds.SystemSMARTForm)
			if !errors.Is(err, tc.class) || !strings.Contains(fmt.Sprint(err), tc.mention) {
				t.Errorf("%v, want %v mentioning %q", err, tc.class, tc.mention)
			}
			if offOrigin.Load() != 0 {
				t.Errorf("unexpected requests")
			}
		})
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestClientSecretNeverInErrors: a hostile portal that echoes the token
// request (its Authorization header, its form) into its error answer
// gets neither the client secret nor its HTTP Basic form into the error.
func TestClientSecretNeverInErrors(t *testing.T) {
	const secret = "cs-SECRET-5ab1"
	for _, method := range []string{"client_secret_basic", "client_secret_post"} {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.ParseForm()
			switch r.URL.Path {
			case "/fhir/.well-known/smart-configuration":
				fmt.Fprintf(w, `{"authorization_endpoint":"https://%[1]s/authorize","token_endpoint":"https://%[1]s/token",`+
					`"grant_types_supported":["password"],"token_endpoint_auth_methods_supported":[%[2]q]}`, r.Host, method)
			default:
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":"invalid_client","error_description":%q}`, fmt.Sprintf("you sent %q %v", r.Header.Get("Authorization"), r.PostForm))
			}
		}))
		conn := testConnector()
		conn.Registrations = map[string]portal.Registration{srv.URL: {ClientID: "acds", RedirectURI: portal.DemoRedirectURI, ClientSecret: secret}}
		_, err := conn.Fetch(context.Background(), srv.Client(), portal.Request{SystemType: acds.SystemSMARTPassword, PortalURL: srv.URL + "/fhir", Credentials: demoCreds})
		srv.Close()
		wantProblem(t, method, err, portal.ErrUnsupported, acds.ProblemPortalUnsupported)
		basic := base64.StdEncoding.EncodeToString([]byte("acds:" + secret))
		if text := fmt.Sprintf("%v %+v", err, err); strings.Contains(text, "SECRET") || strings.Contains(text, basic) || !strings.Contains(text, "you sent") {
			t.Errorf("%s: %s", method, text)
		}
	}
}
