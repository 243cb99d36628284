package portal

import (
	"net/url"
	"strings"
	"testing"
)

// Pages drawn as providers draw them (their markup, not their names).
const (
	dexPasswordPage = `<!DOCTYPE html><html><head><title>dex</title></head><body class="theme-body">
<div class="theme-panel"><h2 class="theme-heading">Log in to Your Account</h2>
<form method="post" action="/dex/auth/local/login?back=&amp;state=st7">
  <div class="theme-form-row"><div class="theme-form-label"><label for="userid">Email Address</label></div>
	<input tabindex="1" required id="login" name="login" type="text" class="theme-form-input" placeholder="email address" autofocus /></div>
  <div class="theme-form-row"><div class="theme-form-label"><label for="password">Password</label></div>
	<input tabindex="2" required id="password" name="password" type="password" class="theme-form-input" placeholder="password" /></div>
  <div id="login-error" class="dex-error-box">Invalid Email Address and password.</div>
  <button tabindex="3" id="submit-login" type="submit" class="dex-btn theme-btn--primary">Login</button>
</form></div></body></html>`
	dexApprovalPage = `<div class="theme-panel"><h2 class="theme-heading">Grant Access</h2>
<div><div class="dex-subtle-text">acds would like to:</div><ul class="dex-list"><li>View basic profile information</li></ul></div>
<div><div class="theme-form-row"><form method="post">
  <input type="hidden" name="req" value="r1"/><input type="hidden" name="hmac" value="h1"/>
  <input type="hidden" name="approval" value="approve">
  <button type="submit" class="dex-btn theme-btn--success"><span class="dex-btn-text">Grant Access</span></button>
</form></div>
<div class="theme-form-row"><form method="post">
  <input type="hidden" name="req" value="r1"/><input type="hidden" name="hmac" value="h1"/>
  <input type="hidden" name="approval" value="rejected">
  <a href="/dex/auth?back"><button class="dex-btn theme-btn-provider"><span class="dex-btn-text">Cancel</span></button></a>
</form></div></div></div>`
	dexChooserPage = `<div class="theme-panel"><h2 class="theme-heading">Log in to dex </h2><div>
<div class="theme-form-row"><a href="/dex/auth/github?state=s1" target="_self"><button class="dex-btn theme-btn-provider">
  <span class="dex-btn-icon dex-btn-icon--github"></span><span class="dex-btn-text">Log in with GitHub</span></button></a></div>
<div class="theme-form-row"><a href="/dex/auth/local?state=s1" target="_self"><button class="dex-btn theme-btn-provider">
  <span class="dex-btn-icon dex-btn-icon--local"></span><span class="dex-btn-text">Log in with Email</span></button></a></div>
</div></div>`
	oidcLoginPage = `<div class="login-card"><h1>Sign-in</h1>
<form autocomplete="off" action="/interaction/u1/login" method="post">
  <input type="hidden" name="prompt" value="login"/>
  <input required type="text" name="login" placeholder="Enter any login" autofocus="on">
  <input required type="password" name="password" placeholder="and password" >
  <button type="submit" class="login login-submit">Sign-in</button>
</form>
<div class="login-help"><a href="/interaction/u1/abort">[ Cancel ]</a></div></div>`
	oidcConsentPage = `<div class="login-card"><h1>Authorize</h1><ul><li>scopes:</li><ul><li>patient/*.rs</li></ul></ul>
<form autocomplete="off" action="/interaction/u1/confirm" method="post">
  <input type="hidden" name="prompt" value="consent"/>
  <button autofocus type="submit" class="login login-submit">Continue</button>
</form>
<div class="login-help"><a href="/interaction/u1/abort">[ Cancel ]</a></div></div>`
	// A login with a search box, a language switch and a sign-up form
	// beside it; the username marked by autocomplete, the submit button
	// named, and a remember-me box checked.
	busyLoginPage = `<form action="/search" method="get"><input type="search" name="q"><button>Search</button></form>
<form action="/lang" method="post"><select name="lang"><option value="en">English<option value="de">Deutsch</select></form>
<form id="kc-form-login" action="/realms/x/login-actions/authenticate?session_code=c1" method="post">
  <label for="u">Benutzer</label><input id="u" name="j_username" type="text" autocomplete="username">
  <label for="p">Kennwort</label><input id="p" name="j_password" type="password" autocomplete="current-password">
  <input type="checkbox" name="rememberMe" checked> <input type="checkbox" name="newsletter">
  <input type="hidden" name="credentialId" value="">
  <input name="login" id="kc-login" type="submit" value="Sign In">
</form>
<form action="/register" method="post"><input name="email" type="email"><input type="password" name="pw" autocomplete="new-password"><input type="password" name="pw2"><button>Sign up</button></form>`
	identifierPage = `<form method="post" action="/u/login/identifier?state=s"><input type="hidden" name="state" value="s">
<label>Email address <input name="username" inputmode="email" required></label><button type="submit" name="action" value="default">Continue</button></form>`
	totpPage = `<form method="post" action="/dex/totp"><label for="totp">One-time code</label>
<input id="totp" name="code" type="text" inputmode="numeric" autocomplete="one-time-code"><button type="submit">Verify</button></form>`
	denyOnlyPage     = `<form method="post" action="/consent"><input type="hidden" name="x" value="1"><button>Do not allow</button></form>`
	orphanButtonPage = `<form id="c" method="post" action="/consent"><input type="hidden" name="t" value="1"></form>
<p>Share your record?</p><button form="c" name="decision" value="yes">Yes, share</button><button form="c" name="decision" value="no">No</button>`
)

func TestClassifyPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		page   string
		kind   formKind
		button string // the submitting button's text
		want   url.Values
	}{
		{"dex password", dexPasswordPage, formLogin, "Login", url.Values{"login": {"u@x"}, "password": {"pw"}}},
		{"dex approval", dexApprovalPage, formConsent, "Grant Access", url.Values{"req": {"r1"}, "hmac": {"h1"}, "approval": {"approve"}}},
		{"dex chooser", dexChooserPage, formOther, "", nil},
		{"oidc-provider login", oidcLoginPage, formLogin, "Sign-in", url.Values{"prompt": {"login"}, "login": {"u@x"}, "password": {"pw"}}},
		{"oidc-provider consent", oidcConsentPage, formConsent, "Continue", url.Values{"prompt": {"consent"}}},
		{"a busy login", busyLoginPage, formLogin, "Sign In", url.Values{"j_username": {"u@x"}, "j_password": {"pw"}, "rememberMe": {"on"},
			"credentialId": {""}, "login": {"Sign In"}}},
		{"username first", identifierPage, formIdentifier, "Continue", url.Values{"state": {"s"}, "username": {"u@x"}, "action": {"default"}}},
		{"one-time code", totpPage, formMFA, "", nil},
		{"only a refusal", denyOnlyPage, formOther, "", nil},
		{"buttons outside their form", orphanButtonPage, formConsent, "Yes, share", url.Values{"t": {"1"}, "decision": {"yes"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := choose(parseHTML(tc.page))
			if sub.kind != tc.kind {
				t.Fatalf("kind %d, want %d", sub.kind, tc.kind)
			}
			if tc.button != "" && (sub.button == nil || sub.button.buttonText() != tc.button) {
				t.Errorf("button %+v, want %q", sub.button, tc.button)
			}
			if tc.want == nil {
				return
			}
			got := url.Values{}
			switch sub.kind {
			case formLogin:
				fillLogin(sub, got, Credentials{Username: "u@x", Password: "pw"}, true)
			case formIdentifier:
				fillLogin(sub, got, Credentials{Username: "u@x", Password: "pw"}, false)
			case formConsent:
				fillConsent(sub, got, "")
			}
			if got.Encode() != tc.want.Encode() {
				t.Errorf("sent %s, want %s", got.Encode(), tc.want.Encode())
			}
		})
	}
}

func TestPageReader(t *testing.T) {
	p := parseHTML(dexPasswordPage + `<script>var f = "<form>";</script><noscript><form></form></noscript>`)
	if len(p.forms) != 1 || p.scripts != 1 {
		t.Fatalf("%d forms, %d scripts", len(p.forms), p.scripts)
	}
	if c := p.forms[0].controls[0]; c.label != "" {
		// Dex's <label for="userid"> names no control (the field's id is
		// "login"): the field has no label.
		t.Errorf("login field label %q", c.label)
	}
	if c := p.forms[0].controls[1]; c.label != "Password" {
		t.Errorf("password label %q", c.label)
	}
	if len(p.errors) != 1 || p.errors[0] != "Invalid Email Address and password." {
		t.Errorf("errors %q", p.errors)
	}
	if strings.Contains(p.text, "var f") || !strings.Contains(p.text, "Log in to Your Account") {
		t.Errorf("text %q", p.text)
	}
	c := parseHTML(dexChooserPage)
	if len(c.links) != 2 || c.links[1].text != "Log in with Email" || c.links[1].href != "/dex/auth/local?state=s1" {
		t.Errorf("links %+v", c.links)
	}
	page, _ := url.Parse("https://idp.example/dex/auth?state=s1")
	links := chooserLinks(page, parseHTML(dexChooserPage+oidcConsentPage+`<a href="https://other.example/x">x</a><a href="#top">top</a><a href="javascript:go()">go</a>`))
	var got []string
	for _, l := range links {
		got = append(got, l.url.String())
	}
	if strings.Join(got, " ") != "https://idp.example/dex/auth/github?state=s1 https://idp.example/dex/auth/local?state=s1" {
		t.Errorf("chooser links %q (the cancel, off-origin, fragment and script links are not)", got)
	}
}

func TestDecision(t *testing.T) {
	for text, want := range map[string]int{"Allow": 1, "Grant Access": 1, "Continue": 1, "Authorize": 1, "Yes, share": 1,
		"Deny": -1, "Cancel": -1, "Do not allow": -1, "Don't allow": -1, "[ Cancel ]": -1, "Sign in": 0, "Login": 0, "": 0} {
		if got := decision(text); got != want {
			t.Errorf("decision(%q) = %d, want %d", text, got, want)
		}
	}
}

func TestScopeNegotiation(t *testing.T) {
	reg := Registration{Scope: DefaultScope}
	for _, tc := range []struct {
		sc   smartConfig
		want string
	}{
		{smartConfig{}, "openid launch/patient patient/*.read"},
		{smartConfig{Capabilities: []string{"permission-v2"}}, "openid launch/patient patient/*.rs"},
		{smartConfig{Scopes: []string{"openid", "email", "profile"}}, "openid"},
		{smartConfig{Scopes: []string{"patient/*.read", "patient/*.rs", "launch/patient"}, Capabilities: []string{"permission-v2"}}, "launch/patient patient/*.rs"},
		{smartConfig{Scopes: []string{"patient/*.read", "launch/patient"}, Capabilities: []string{"permission-v2"}}, "launch/patient patient/*.read"},
	} {
		got, err := negotiateScopes(reg, &tc.sc)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("%+v: %q %v, want %q", tc.sc, got, err, tc.want)
		}
	}
	for s, want := range map[string]string{"patient/*.read": "patient/*.rs", "user/Observation.write": "user/Observation.cud",
		"system/*.*": "system/*.cruds", "openid": "", "patient/*.rs": "", "launch/patient": ""} {
		if got := smartV2(s); got != want {
			t.Errorf("smartV2(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestClientAuthChoice(t *testing.T) {
	s := &session{c: testConnector()}
	secret := Registration{ClientID: "c", ClientSecret: "sec"}
	for _, tc := range []struct {
		reg     Registration
		methods []string
		want    string
	}{
		{Registration{ClientID: "c"}, nil, authNone},
		{Registration{ClientID: "c"}, []string{"client_secret_basic"}, authNone},
		{secret, nil, authSecretBasic},
		{secret, []string{"client_secret_post", "client_secret_basic"}, authSecretBasic},
		{secret, []string{"client_secret_post"}, authSecretPost},
		{secret, []string{"private_key_jwt"}, ""},
		{Registration{ClientID: "c", ClientSecret: "sec", AuthMethod: authSecretPost}, []string{"client_secret_basic", "client_secret_post"}, authSecretPost},
		{Registration{ClientID: "c", ClientSecret: "sec", AuthMethod: authSecretPost}, nil, authSecretPost},
		{Registration{ClientID: "c", ClientSecret: "sec", AuthMethod: authSecretPost}, []string{"client_secret_basic"}, ""},
		{Registration{ClientID: "c", ClientSecret: "sec", AuthMethod: authSecretBasic}, []string{"client_secret_post"}, ""},
	} {
		got, err := s.clientAuth(tc.reg, &smartConfig{TokenAuthMethods: tc.methods})
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%v with %v: %q %v, want %q", tc.reg, tc.methods, got, err, tc.want)
		}
	}
}
