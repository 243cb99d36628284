package demoportal

import (
	"crypto/subtle"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The App Launch login of the demo portal: the authorization endpoint and
// the pages behind it, drawn as Options.Pages says — the demo's own, or
// as node-oidc-provider or Dex draw theirs, with an optional sign-in
// chooser in front, or as a single-page application no form-driving
// client can sign in to.

const sessionCookie = "demo_portal_session"

func (d *Portal) loginRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /auth/authorize", d.authorize)
	mux.HandleFunc("GET /auth/app.js", d.appScript)
	mux.HandleFunc("GET /auth/login", d.loginPage)
	mux.HandleFunc("POST /auth/login", d.login)
	mux.HandleFunc("POST /auth/mfa", d.mfa)
	mux.HandleFunc("POST /auth/consent", d.consent)
	// node-oidc-provider's interaction routes.
	mux.HandleFunc("GET /auth/interaction/{uid}", d.interaction)
	mux.HandleFunc("POST /auth/interaction/{uid}/login", d.interactionLogin)
	mux.HandleFunc("POST /auth/interaction/{uid}/confirm", d.interactionConfirm)
	mux.HandleFunc("GET /auth/interaction/{uid}/abort", d.interactionAbort)
	// Dex's connector and approval routes.
	mux.HandleFunc("GET /auth/dex/local", d.dexLoginPage)
	mux.HandleFunc("POST /auth/dex/local", d.dexLogin)
	mux.HandleFunc("GET /auth/dex/approval", d.dexApprovalPage)
	mux.HandleFunc("POST /auth/dex/approval", d.dexApproval)
	mux.HandleFunc("GET /auth/dex/github", d.dexGitHub)
	mux.HandleFunc("GET /auth/dex/saml", d.dexSAML)
}

// pageTmpl draws the demo's own pages.
var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ACDS demo portal</title></head>
<body><h1>ACDS demo portal</h1>
{{if .Error}}<p class="error" data-error="{{.ErrorCode}}">{{.Error}}</p>{{end}}
{{if eq .Step "login"}}<form method="post" action="/auth/login" id="login">
<input type="hidden" name="csrf_token" value="{{.CSRF}}"><input type="hidden" name="txn" value="{{.Txn}}">
<label>Username <input type="text" name="username" autocomplete="username"></label>
<label>Password <input type="password" name="password" autocomplete="current-password"></label>
<button type="submit">Sign in</button></form>{{end}}
{{if eq .Step "mfa"}}<form method="post" action="/auth/mfa" id="mfa">
<input type="hidden" name="csrf_token" value="{{.CSRF}}"><input type="hidden" name="txn" value="{{.Txn}}">
<label>One-time code <input type="text" name="otp" inputmode="numeric"></label>
<button type="submit">Verify</button></form>{{end}}
{{if eq .Step "consent"}}<form method="post" action="/auth/consent" id="consent">
<input type="hidden" name="csrf_token" value="{{.CSRF}}"><input type="hidden" name="txn" value="{{.Txn}}">
<p>{{.ClientID}} asks to read your health record ({{.Scope}}).</p>
<label>Patient <select name="patient">{{range .Patients}}<option value="{{.ID}}">{{.Name}}</option>{{end}}</select></label>
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button></form>{{end}}
</body></html>
`))

// oidcTmpl draws node-oidc-provider's development interaction pages.
var oidcTmpl = template.Must(template.New("oidc").Parse(`<!DOCTYPE html>
<html >
  <head>
    <meta http-equiv="X-UA-Compatible" content="IE=edge">
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1, shrink-to-fit=no">
    <title>{{if eq .Step "consent"}}Authorize{{else}}Sign-in{{end}}</title>
    <style>body { font-family: sans-serif; } .login-card { width: 274px; margin: 0 auto; }</style>
  </head>
  <body>
    <div class="login-card">
      <h1>{{if eq .Step "consent"}}Authorize{{else}}Sign-in{{end}}</h1>
      {{if .Error}}<p class="login-help">{{.Error}}</p>{{end}}
      {{if eq .Step "login"}}<form autocomplete="off" action="/auth/interaction/{{.Txn}}/login" method="post">
  <input type="hidden" name="prompt" value="login"/>
  <input required type="text" name="login" placeholder="Enter any login" autofocus="on">
  <input required type="password" name="password" placeholder="and password" >

  <button type="submit" class="login login-submit">Sign-in</button>
</form>{{end}}
      {{if eq .Step "consent"}}<div class="login-client-image"></div>
<ul>
  <li>scopes:</li>
  <ul>{{range .Scopes}}
      <li>{{.}}</li>{{end}}
  </ul>
</ul>

<form autocomplete="off" action="/auth/interaction/{{.Txn}}/confirm" method="post">
  <input type="hidden" name="prompt" value="consent"/>
  <button autofocus type="submit" class="login login-submit">Continue</button>
</form>{{end}}
      <div class="login-help">
        <a href="/auth/interaction/{{.Txn}}/abort">[ Cancel ]</a>
      </div>
    </div>
    <div class="grant-debug">
      <details>
        <summary style="text-align: center;">(Click to expand) DEBUG information</summary>
        <div><strong>uid</strong>: {{.Txn}}</div>
      </details>
    </div>
  </body>
</html>
`))

// dexTmpl draws Dex's sign-in chooser, password connector and approval
// pages.
var dexTmpl = template.Must(template.New("dex").Parse(`<!DOCTYPE html>
<html>
  <head>
    <meta charset="utf-8">
    <meta http-equiv="X-UA-Compatible" content="IE=edge">
    <title>dex</title>
    <link href="/auth/dex/static/main.css" rel="stylesheet">
  </head>
  <body class="theme-body">
    <div class="theme-navbar"><div class="theme-navbar__logo-wrap"><img class="theme-navbar__logo" src="/auth/dex/theme/logo.png"></div></div>
    <div class="dex-container">
{{if eq .Step "chooser"}}<div class="theme-panel">
  <h2 class="theme-heading">Log in to dex </h2>
  <div>
      <div class="theme-form-row">
        <a href="{{.Login}}" target="_self">
          <button class="dex-btn theme-btn-provider">
            <span class="dex-btn-icon dex-btn-icon--local"></span>
            <span class="dex-btn-text">Log in with Email</span>
          </button>
        </a>
      </div>
      <div class="theme-form-row">
        <a href="/auth/dex/github?req={{.Txn}}" target="_self">
          <button class="dex-btn theme-btn-provider">
            <span class="dex-btn-icon dex-btn-icon--github"></span>
            <span class="dex-btn-text">Log in with GitHub</span>
          </button>
        </a>
      </div>
      <div class="theme-form-row">
        <a href="/auth/dex/saml?req={{.Txn}}" target="_self">
          <button class="dex-btn theme-btn-provider">
            <span class="dex-btn-icon dex-btn-icon--saml"></span>
            <span class="dex-btn-text">Log in with Example SSO</span>
          </button>
        </a>
      </div>
  </div>
</div>{{end}}
{{if eq .Step "login"}}<div class="theme-panel">
  <h2 class="theme-heading">Log in to Your Account</h2>
  <form method="post" action="/auth/dex/local?req={{.Txn}}">
    <div class="theme-form-row">
      <div class="theme-form-label">
        <label for="userid">Email Address</label>
      </div>
	  <input tabindex="1" required id="login" name="login" type="text" class="theme-form-input" placeholder="email address" autofocus />
    </div>
    <div class="theme-form-row">
      <div class="theme-form-label">
        <label for="password">Password</label>
      </div>
	  <input tabindex="2" required id="password" name="password" type="password" class="theme-form-input" placeholder="password" />
    </div>
    {{if .Error}}
      <div id="login-error" class="dex-error-box">
        {{.Error}}
      </div>
    {{end}}
    <button tabindex="3" id="submit-login" type="submit" class="dex-btn theme-btn--primary">Login</button>
  </form>
</div>{{end}}
{{if eq .Step "consent"}}<div class="theme-panel">
  <h2 class="theme-heading">Grant Access</h2>
  <hr class="dex-separator">
  <div>
    <div class="dex-subtle-text">{{.ClientID}} would like to:</div>
    <ul class="dex-list">{{range .Scopes}}
      <li>{{.}}</li>{{end}}
    </ul>
  </div>
  <hr class="dex-separator">
  <div>
    <div class="theme-form-row">
      <form method="post">
        <input type="hidden" name="req" value="{{.Txn}}"/>
        <input type="hidden" name="approval" value="approve">
        <button type="submit" class="dex-btn theme-btn--success">
            <span class="dex-btn-text">Grant Access</span>
        </button>
      </form>
    </div>
    <div class="theme-form-row">
      <form method="post">
        <input type="hidden" name="req" value="{{.Txn}}"/>
        <input type="hidden" name="approval" value="rejected">
        <button type="submit" class="dex-btn theme-btn-provider">
            <span class="dex-btn-text">Cancel</span>
        </button>
      </form>
    </div>
  </div>
</div>{{end}}
{{if eq .Step "saml"}}<div class="theme-panel">
  <h2 class="theme-heading">Redirecting to Example SSO…</h2>
  <form method="post" action="https://sso.example.invalid/saml2/sso" id="saml">
    <input type="hidden" name="SAMLRequest" value="{{.Txn}}">
    <input type="hidden" name="RelayState" value="{{.Txn}}">
  </form>
  <script>document.getElementById("saml").submit();</script>
</div>{{end}}
    </div>
  </body>
</html>
`))

// spaTmpl is the page of a login built by a script.
var spaTmpl = template.Must(template.New("spa").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in</title>
<script type="module" src="/auth/app.js"></script></head>
<body><div id="root"></div>
<noscript>You need to enable JavaScript to run this app.</noscript>
</body></html>
`))

type pageData struct {
	Step, Error, ErrorCode, CSRF, Txn, ClientID, Scope string
	Login                                              string // the chooser's link to the password login
	Scopes                                             []string
	Patients                                           []PatientInfo
}

func (d *Portal) render(w http.ResponseWriter, status int, p pageData) {
	tmpl := pageTmpl
	switch d.opts.Pages.Style {
	case StyleOIDCProvider:
		if p.Step == "login" || p.Step == "consent" {
			tmpl = oidcTmpl
		}
	case StyleDex:
		if p.Step == "login" || p.Step == "consent" {
			tmpl = dexTmpl
		}
	}
	if p.Step == "chooser" || p.Step == "saml" {
		tmpl = dexTmpl
	}
	p.Scopes = strings.Fields(p.Scope)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	tmpl.Execute(w, p)
}

// loginURL is the address of the password login of a transaction, in the
// page style.
func (d *Portal) loginURL(id string) string {
	switch d.opts.Pages.Style {
	case StyleOIDCProvider:
		return "/auth/interaction/" + id
	case StyleDex:
		return "/auth/dex/local?req=" + url.QueryEscape(id)
	}
	return "/auth/login?txn=" + url.QueryEscape(id)
}

func (d *Portal) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != d.opts.ClientID || q.Get("redirect_uri") != d.opts.RedirectURI {
		// Never redirect to an unregistered URI.
		d.render(w, http.StatusBadRequest, pageData{Step: "error", Error: "unknown client or redirect URI (invalid_client)", ErrorCode: "invalid-client"})
		return
	}
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 || q.Get("state") == "" {
		d.render(w, http.StatusBadRequest, pageData{Step: "error", Error: "the request needs response_type=code, state and a S256 PKCE challenge", ErrorCode: "invalid-request"})
		return
	}
	t := &txn{cookie: randToken(24), csrf: randToken(24), clientID: q.Get("client_id"), redirect: q.Get("redirect_uri"),
		state: q.Get("state"), chall: q.Get("code_challenge"), scope: q.Get("scope"), expires: d.now().Add(10 * time.Minute)}
	if bad := d.checkScope(t.scope); bad != "" {
		d.finish(w, r, t, "", "invalid_scope")
		return
	}
	id := randToken(16)
	d.mu.Lock()
	d.txns[id] = t
	d.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: t.cookie, Path: "/auth", HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	switch {
	case d.opts.Pages.ScriptOnly:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		spaTmpl.Execute(w, nil)
	case d.opts.Pages.Chooser:
		d.render(w, http.StatusOK, pageData{Step: "chooser", Txn: id, Login: d.loginURL(id)})
	case d.opts.Pages.Style == StyleDemo:
		d.render(w, http.StatusOK, pageData{Step: "login", CSRF: t.csrf, Txn: id})
	default:
		http.Redirect(w, r, d.loginURL(id), http.StatusSeeOther)
	}
}

// appScript is the single-page application's script: it would draw the
// login form, which only a browser runs.
func (d *Portal) appScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/javascript")
	w.Write([]byte(`const root = document.getElementById("root");
const form = document.createElement("form");
form.method = "post"; form.action = "/auth/login";
form.innerHTML = '<input name="username"><input type="password" name="password"><button>Sign in</button>';
root.append(form);
`))
}

// txnOf finds a transaction by id and checks its session cookie, and
// when csrf is set the form's CSRF token; it answers the refusal itself.
func (d *Portal) txnOf(w http.ResponseWriter, r *http.Request, id string, csrf bool) (*txn, bool) {
	d.mu.Lock()
	t := d.txns[id]
	d.mu.Unlock()
	c, err := r.Cookie(sessionCookie)
	if t == nil || err != nil || d.now().After(t.expires) ||
		subtle.ConstantTimeCompare([]byte(c.Value), []byte(t.cookie)) != 1 ||
		csrf && subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf_token")), []byte(t.csrf)) != 1 {
		d.render(w, http.StatusForbidden, pageData{Step: "error", Error: "the form expired or its CSRF token is wrong", ErrorCode: "csrf"})
		return nil, false
	}
	return t, true
}

// parseForm reads a posted form, answering a bad one itself.
func (d *Portal) parseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		d.render(w, http.StatusBadRequest, pageData{Step: "error", Error: "bad form", ErrorCode: "invalid-request"})
		return false
	}
	return true
}

// formTxn finds the transaction of a demo-style form post and checks its
// cookie and CSRF token.
func (d *Portal) formTxn(w http.ResponseWriter, r *http.Request) (string, *txn, bool) {
	if !d.parseForm(w, r) {
		return "", nil, false
	}
	id := r.PostForm.Get("txn")
	t, ok := d.txnOf(w, r, id, true)
	return id, t, ok
}

// checkPassword checks a posted login. On success it marks the
// transaction signed in; otherwise it answers with the MFA page or
// step's page re-rendered with the error, and returns false.
func (d *Portal) checkPassword(w http.ResponseWriter, id string, t *txn, user, pass string, step pageData) bool {
	switch d.checkLogin(user, pass) {
	case loginOK:
		d.mu.Lock()
		t.loggedIn = true
		d.mu.Unlock()
		return true
	case loginMFA:
		d.render(w, http.StatusOK, pageData{Step: "mfa", CSRF: t.csrf, Txn: id})
	case loginLocked:
		step.Error, step.ErrorCode = "This account is locked.", "account-locked"
		d.render(w, d.opts.Pages.RejectStatus, step)
	default:
		step.Error, step.ErrorCode = "Invalid username or password.", "invalid-credentials"
		d.render(w, d.opts.Pages.RejectStatus, step)
	}
	return false
}

// loginPage draws the demo's login form, the chooser's password login.
func (d *Portal) loginPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("txn")
	t, ok := d.txnOf(w, r, id, false)
	if !ok {
		return
	}
	d.render(w, http.StatusOK, pageData{Step: "login", CSRF: t.csrf, Txn: id})
}

func (d *Portal) login(w http.ResponseWriter, r *http.Request) {
	id, t, ok := d.formTxn(w, r)
	if !ok {
		return
	}
	if d.checkPassword(w, id, t, r.PostForm.Get("username"), r.PostForm.Get("password"), pageData{Step: "login", CSRF: t.csrf, Txn: id}) {
		d.render(w, http.StatusOK, pageData{Step: "consent", CSRF: t.csrf, Txn: id, ClientID: t.clientID, Scope: t.scope, Patients: d.Patients()})
	}
}

// mfa refuses every one-time code: the demo account has no second factor
// a client could know.
func (d *Portal) mfa(w http.ResponseWriter, r *http.Request) {
	id, t, ok := d.formTxn(w, r)
	if !ok {
		return
	}
	d.render(w, http.StatusOK, pageData{Step: "mfa", CSRF: t.csrf, Txn: id, Error: "Invalid code.", ErrorCode: "invalid-otp"})
}

func (d *Portal) consent(w http.ResponseWriter, r *http.Request) {
	id, t, ok := d.formTxn(w, r)
	if !ok {
		return
	}
	switch {
	case r.PostForm.Get("decision") != "allow":
		d.end(w, r, id, t, "", "access_denied")
	case d.record(r.PostForm.Get("patient")) == nil:
		d.end(w, r, id, t, "", "invalid_request")
	default:
		d.end(w, r, id, t, r.PostForm.Get("patient"), "")
	}
}

// end ends a signed-in transaction with its authorization response.
func (d *Portal) end(w http.ResponseWriter, r *http.Request, id string, t *txn, patient, oauthErr string) {
	d.mu.Lock()
	delete(d.txns, id)
	d.mu.Unlock()
	if !t.loggedIn {
		d.render(w, http.StatusForbidden, pageData{Step: "error", Error: "not signed in", ErrorCode: "not-signed-in"})
		return
	}
	d.finish(w, r, t, patient, oauthErr)
}

// finish redirects to the client with the authorization response: a code
// for patient, or the error oauthErr; with iss when Options.IssParameter.
func (d *Portal) finish(w http.ResponseWriter, r *http.Request, t *txn, patient, oauthErr string) {
	target, _ := url.Parse(t.redirect)
	q := target.Query()
	q.Set("state", t.state)
	if d.opts.IssParameter {
		iss := issuer(r)
		if d.opts.Failures.WrongIss {
			iss = "https://idp.example.invalid/auth"
		}
		q.Set("iss", iss)
	}
	if oauthErr != "" {
		q.Set("error", oauthErr)
	} else {
		code := randToken(24)
		d.mu.Lock()
		d.codes[code] = &authCode{clientID: t.clientID, redirect: t.redirect, chall: t.chall, patient: patient, scope: t.scope, expires: d.now().Add(time.Minute)}
		d.mu.Unlock()
		q.Set("code", code)
	}
	target.RawQuery = q.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

// interaction draws node-oidc-provider's current prompt: the login, then
// the consent.
func (d *Portal) interaction(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uid")
	t, ok := d.txnOf(w, r, id, false)
	if !ok {
		return
	}
	step := "login"
	if t.loggedIn {
		step = "consent"
	}
	d.render(w, http.StatusOK, pageData{Step: step, Txn: id, CSRF: t.csrf, ClientID: t.clientID, Scope: t.scope})
}

func (d *Portal) interactionLogin(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uid")
	if !d.parseForm(w, r) {
		return
	}
	t, ok := d.txnOf(w, r, id, false)
	if !ok {
		return
	}
	if r.PostForm.Get("prompt") != "login" {
		d.render(w, http.StatusBadRequest, pageData{Step: "error", Error: "invalid_request: prompt", ErrorCode: "invalid-request"})
		return
	}
	if d.checkPassword(w, id, t, r.PostForm.Get("login"), r.PostForm.Get("password"), pageData{Step: "login", Txn: id}) {
		http.Redirect(w, r, "/auth/interaction/"+id, http.StatusSeeOther)
	}
}

func (d *Portal) interactionConfirm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uid")
	if !d.parseForm(w, r) {
		return
	}
	t, ok := d.txnOf(w, r, id, false)
	if !ok {
		return
	}
	if r.PostForm.Get("prompt") != "consent" {
		d.render(w, http.StatusBadRequest, pageData{Step: "error", Error: "invalid_request: prompt", ErrorCode: "invalid-request"})
		return
	}
	d.end(w, r, id, t, d.records[0].ID, "")
}

func (d *Portal) interactionAbort(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uid")
	t, ok := d.txnOf(w, r, id, false)
	if !ok {
		return
	}
	d.mu.Lock()
	delete(d.txns, id)
	d.mu.Unlock()
	d.finish(w, r, t, "", "access_denied")
}

// dexTxn is the transaction of a Dex-style request (?req=).
func (d *Portal) dexTxn(w http.ResponseWriter, r *http.Request) (string, *txn, bool) {
	id := r.URL.Query().Get("req")
	if r.Method == http.MethodPost {
		if !d.parseForm(w, r) {
			return "", nil, false
		}
	}
	t, ok := d.txnOf(w, r, id, false)
	return id, t, ok
}

func (d *Portal) dexLoginPage(w http.ResponseWriter, r *http.Request) {
	id, _, ok := d.dexTxn(w, r)
	if ok {
		d.render(w, http.StatusOK, pageData{Step: "login", Txn: id})
	}
}

func (d *Portal) dexLogin(w http.ResponseWriter, r *http.Request) {
	id, t, ok := d.dexTxn(w, r)
	if ok && d.checkPassword(w, id, t, r.PostForm.Get("login"), r.PostForm.Get("password"), pageData{Step: "login", Txn: id}) {
		http.Redirect(w, r, "/auth/dex/approval?req="+url.QueryEscape(id), http.StatusSeeOther)
	}
}

func (d *Portal) dexApprovalPage(w http.ResponseWriter, r *http.Request) {
	id, t, ok := d.dexTxn(w, r)
	if !ok {
		return
	}
	if !t.loggedIn {
		d.render(w, http.StatusForbidden, pageData{Step: "error", Error: "not signed in", ErrorCode: "not-signed-in"})
		return
	}
	d.render(w, http.StatusOK, pageData{Step: "consent", Txn: id, ClientID: t.clientID, Scope: t.scope})
}

func (d *Portal) dexApproval(w http.ResponseWriter, r *http.Request) {
	id, t, ok := d.dexTxn(w, r)
	if !ok {
		return
	}
	if r.PostForm.Get("req") != id {
		d.render(w, http.StatusBadRequest, pageData{Step: "error", Error: "the form's request is not the page's", ErrorCode: "invalid-request"})
		return
	}
	if r.PostForm.Get("approval") != "approve" {
		d.end(w, r, id, t, "", "access_denied")
		return
	}
	d.end(w, r, id, t, d.records[0].ID, "")
}

// dexGitHub is the chooser's external provider: a redirect off the
// portal's origin, which no test ever follows.
func (d *Portal) dexGitHub(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := d.dexTxn(w, r); ok {
		http.Redirect(w, r, "https://github.example.invalid/login/oauth/authorize?client_id=demo", http.StatusFound)
	}
}

// dexSAML is the chooser's provider on the portal that asks no password:
// a page that posts a SAML request elsewhere by script.
func (d *Portal) dexSAML(w http.ResponseWriter, r *http.Request) {
	if id, _, ok := d.dexTxn(w, r); ok {
		d.render(w, http.StatusOK, pageData{Step: "saml", Txn: id})
	}
}
