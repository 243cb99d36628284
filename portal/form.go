package portal

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/oauth2"
)

// The login-form driver of smart-form: it reads each page the portal
// answers the authorization request with and does what a person would —
// signs in on a login page (or enters the username first where the page
// asks for it alone), approves a consent page, follows the one link of a
// sign-in chooser that leads to a password login — until the portal
// redirects to the registered redirect URI. Forms and their parts are
// found by what they are (a password field, a button that says "Allow")
// and never by the names one portal happens to give them.

const (
	// maxLoginSteps bounds the pages one login may submit.
	maxLoginSteps = 8
	// maxChooserLinks bounds the links of a sign-in chooser tried.
	maxChooserLinks = 8
)

// formFlow runs SMART App Launch: authorization request with PKCE, the
// portal's login pages, the intercepted redirect and the code exchange.
func (s *session) formFlow(ctx context.Context, recordID string) error {
	sc, err := s.discover(ctx)
	if err != nil {
		return err
	}
	if err := sc.checkCodeFlow(); err != nil {
		return err
	}
	if err := s.c.checkPublished("SMART discovery: authorization endpoint", sc.AuthorizationEndpoint); err != nil {
		return err
	}
	client, err := s.oauthClient(sc)
	if err != nil {
		return err
	}
	s.redirectURI = client.reg.RedirectURI
	verifier := oauth2.GenerateVerifier()
	state, err := s.random(16)
	if err != nil {
		return err
	}
	authURL := client.config().AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("aud", s.base.String()))
	ex, err := s.do(ctx, "authorization request", false, getter(authURL, "text/html"))
	if err != nil {
		return err
	}
	var st loginState
	for step := 0; ; step++ {
		if ex.status >= 300 && ex.status < 400 {
			return s.finishForm(ctx, ex, client, state, verifier)
		}
		if step >= maxLoginSteps {
			return &Error{Kind: ErrResponseInvalid, Op: "login form", Detail: "too many login steps"}
		}
		if ex, err = s.loginStep(ctx, ex, &st, recordID); err != nil {
			return err
		}
	}
}

// loginState is what a login has done so far.
type loginState struct {
	posted     bool // the password was sent
	identified bool // a username-only form was sent
	chose      bool // a sign-in chooser was followed
}

// formKind is what a form is for.
type formKind int

const (
	formOther formKind = iota
	formConsent
	formIdentifier // the username alone, the password on a later page
	formLogin
	formMFA
)

// submission is a form to submit and the button that submits it.
type submission struct {
	kind   formKind
	form   *htmlForm
	button *htmlControl // nil: submitted without a button
}

// loginStep answers one page of the login and returns the portal's answer
// to that.
func (s *session) loginStep(ctx context.Context, ex *exchange, st *loginState, recordID string) (*exchange, error) {
	const op = "login form"
	page := parseHTML(string(ex.body))
	sub := choose(page)
	ok, clientErr := ex.status >= 200 && ex.status < 300, ex.status >= 400 && ex.status < 500
	if !ok && !clientErr {
		return nil, &Error{Kind: ErrResponseInvalid, Op: op, Status: ex.status}
	}
	switch {
	case sub.kind == formMFA:
		return nil, &Error{Kind: ErrMFARequired, Op: op, Status: ex.status}
	case st.posted && (sub.kind == formLogin || sub.kind == formIdentifier),
		st.identified && sub.kind == formIdentifier:
		// The login again, after the credentials were sent: refused,
		// whatever status the page came with.
		e := &Error{Kind: ErrAuthFailed, Op: op, Status: ex.status, Detail: s.red.detail(strings.Join(page.errors, ", "))}
		if locked(page) {
			e.Err = ErrAccountLocked
		}
		return nil, e
	case clientErr && (st.posted || sub.kind < formIdentifier):
		// An error page: before the login, most often the portal
		// refusing the authorization request itself.
		return nil, s.pageError(op, ex, page, !st.posted)
	case sub.kind == formOther && (st.posted || st.identified || st.chose):
		return nil, s.needsBrowser(op, page, "")
	case sub.kind == formOther:
		st.chose = true
		return s.followChooser(ctx, ex, page)
	}
	vals := url.Values{}
	switch sub.kind {
	case formLogin:
		st.posted = true
		fillLogin(sub, vals, s.creds, true)
	case formIdentifier:
		st.identified = true
		fillLogin(sub, vals, s.creds, false)
	case formConsent:
		fillConsent(sub, vals, recordID)
	}
	return s.submit(ctx, op, ex.url, sub, vals)
}

// locked reports whether a re-rendered login says the account is
// locked: in an error message, or in so many words anywhere on a page
// that marks none.
func locked(page *htmlPage) bool {
	for _, pe := range page.errors {
		if strings.Contains(strings.ToLower(pe), "locked") {
			return true
		}
	}
	text := strings.ToLower(page.text)
	for _, p := range []string{"account is locked", "account locked", "account has been locked", "locked out"} {
		if len(page.errors) == 0 && strings.Contains(text, p) {
			return true
		}
	}
	return false
}

// submit sends a filled form as a browser would, with its button's
// formaction and formmethod. The password is only ever posted.
func (s *session) submit(ctx context.Context, op string, page *url.URL, sub submission, vals url.Values) (*exchange, error) {
	action, method := sub.form.action, sub.form.method
	if b := sub.button; b != nil {
		if b.formAction != "" {
			action = b.formAction
		}
		if b.formMethod != "" {
			method = b.formMethod
		}
	}
	target, err := page.Parse(strings.TrimSpace(action))
	if err != nil {
		return nil, &Error{Kind: ErrResponseInvalid, Op: op, Detail: "bad form action"}
	}
	target.Fragment = ""
	if err := s.c.checkPublished(op, target.String()); err != nil {
		return nil, err
	}
	switch {
	case method == http.MethodPost:
		return s.do(ctx, op, false, poster(target.String(), vals, "text/html"))
	case method == http.MethodGet && sub.kind != formLogin:
		target.RawQuery = vals.Encode()
		return s.do(ctx, op, false, getter(target.String(), "text/html"))
	case method == http.MethodGet:
		return nil, &Error{Kind: ErrUnsupported, Op: op, Detail: "the login form would send the password in its URL (method GET)"}
	}
	return nil, &Error{Kind: ErrUnsupported, Op: op, Detail: s.red.detail(fmt.Sprintf("the form's method %q is neither POST nor GET", method))}
}

// pageError classifies an error page (4xx). Before the login it is most
// often the portal refusing the authorization request, with the OAuth2
// error code in its text: the registration's fault, ErrUnsupported.
func (s *session) pageError(op string, ex *exchange, page *htmlPage, beforeLogin bool) error {
	detail := strings.Join(page.errors, ", ")
	if detail == "" {
		detail = page.text
	}
	e := &Error{Kind: ErrResponseInvalid, Op: op, Status: ex.status, Detail: s.red.detail(detail)}
	if beforeLogin {
		text := strings.ToLower(page.text + " " + strings.Join(page.errors, " "))
		for _, code := range []string{"invalid_client", "unauthorized_client", "invalid_redirect_uri", "redirect_uri_mismatch",
			"invalid_scope", "unsupported_response_type", "invalid_request"} {
			if strings.Contains(text, code) {
				e.Kind = ErrUnsupported
				break
			}
		}
	}
	return e
}

// needsBrowser is the error of a page that only a browser can take
// further.
func (s *session) needsBrowser(op string, page *htmlPage, what string) error {
	why := what
	if why == "" {
		why = "the page has no form to sign in with"
		if page.scripts > 0 {
			why += " (a script draws the login)"
		}
	}
	return &Error{Kind: ErrUnsupported, Op: op, Detail: why + "; this portal needs a browser-driven login"}
}

// choose picks the form of a page to submit: a second-factor form first
// (which ends the login), then a password login, a username-only form
// and a consent form.
func choose(page *htmlPage) submission {
	best := submission{kind: formOther}
	for _, f := range page.forms {
		if sub := classify(f); sub.kind > best.kind {
			best = sub
		}
	}
	return best
}

// visible reports whether a control is one a person sees and can change.
func (c htmlControl) visible() bool { return c.typ != "hidden" && !c.disabled }

// textual reports whether a control takes typed text.
func (c htmlControl) textual() bool {
	switch c.typ {
	case "text", "email", "tel", "number", "search", "url", "username", "password", "textarea":
		return c.visible() && !c.readonly
	}
	return false
}

// submits reports whether a control is a submit button.
func (c htmlControl) submits() bool {
	return !c.disabled && (c.typ == "submit" || c.typ == "image") && (c.tag == "button" || c.tag == "input")
}

// words is the lower-case words of s, split at anything but letters.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) })
}

var (
	denyWords    = []string{"deny", "reject", "rejected", "refuse", "decline", "cancel", "abort", "disallow", "no", "not", "don", "dont", "back"}
	approveWords = []string{"allow", "approve", "approved", "accept", "authorize", "authorise", "grant", "continue", "confirm", "agree",
		"yes", "consent", "proceed", "ok", "okay", "share"}
)

// decision says whether text approves (+1), refuses (-1) or neither (0).
// A refusal word wins: "Do not allow" refuses.
func decision(text string) int {
	ws := words(text)
	for _, w := range ws {
		if slices.Contains(denyWords, w) {
			return -1
		}
	}
	for _, w := range ws {
		if slices.Contains(approveWords, w) {
			return 1
		}
	}
	return 0
}

// buttonText is what a button says.
func (c htmlControl) buttonText() string {
	if t := strings.TrimSpace(c.text + " " + c.label); t != "" {
		return t
	}
	return c.value
}

// isOTP reports whether a field asks for a one-time code.
func isOTP(c htmlControl) bool {
	if !c.visible() || c.typ == "checkbox" || c.typ == "radio" || c.submits() {
		return false
	}
	if c.autocomplete == "one-time-code" {
		return true
	}
	for _, n := range []string{c.name, c.id} {
		n = strings.ToLower(n)
		if n == "otp" || n == "totp" || n == "code" && c.inputmode == "numeric" || strings.Contains(n, "mfa") ||
			strings.Contains(n, "one_time") || strings.Contains(n, "onetime") || strings.Contains(n, "one-time") ||
			n == "verification_code" || strings.Contains(n, "2fa") {
			return true
		}
	}
	l := strings.ToLower(c.label)
	for _, p := range []string{"one-time", "one time", "verification code", "authentication code", "security code", "authenticator"} {
		if strings.Contains(l, p) {
			return true
		}
	}
	return false
}

// userWords are the words naming a username field.
var userWords = []string{"user", "username", "userid", "login", "email", "mail", "account", "identifier", "id", "uid", "member", "name"}

// usernameField returns the index of the field the username goes in, or
// -1: the field the page marks for it (autocomplete username or email), an
// email field, one named or labelled for it, else the first text field
// before the password field.
func usernameField(f *htmlForm) int {
	best, bestScore, first := -1, 0, -1
	for i, c := range f.controls {
		if !c.textual() || c.typ == "password" || c.typ == "number" || c.typ == "search" || c.typ == "url" || c.tag == "textarea" || isOTP(c) {
			if c.typ == "password" && first < 0 {
				first = -2 // no text field before the password
			}
			continue
		}
		if first == -1 {
			first = i
		}
		score := 0
		switch {
		case c.autocomplete == "username" || strings.HasSuffix(c.autocomplete, " username") || c.autocomplete == "email":
			score = 3
		case c.typ == "email" || c.typ == "username":
			score = 2
		default:
			for _, w := range words(c.name + " " + c.id + " " + c.label + " " + c.placeholder) {
				if slices.Contains(userWords, w) || strings.HasPrefix(w, "user") || strings.HasSuffix(w, "email") {
					score = 1
				}
			}
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 && first >= 0 {
		best = first
	}
	return best
}

// classify says what a form is for, and which button submits it.
func classify(f *htmlForm) submission {
	var passwords, texts []int
	for i, c := range f.controls {
		switch {
		case isOTP(c):
			return submission{kind: formMFA, form: f}
		case c.typ == "password" && c.visible():
			passwords = append(passwords, i)
		case c.textual():
			texts = append(texts, i)
		}
	}
	// The submitting button: for a login, the first that does not
	// refuse; for consent, the first that approves.
	var neutral, approve *htmlControl
	for i := range f.controls {
		c := &f.controls[i]
		if !c.submits() {
			continue
		}
		switch decision(c.buttonText()) {
		case 1:
			if approve == nil {
				approve = c
			}
			fallthrough
		case 0:
			if neutral == nil {
				neutral = c
			}
		}
	}
	hasButton := slices.ContainsFunc(f.controls, htmlControl.submits)
	switch {
	case len(passwords) == 1 && f.controls[passwords[0]].autocomplete != "new-password":
		return submission{kind: formLogin, form: f, button: neutral}
	case len(passwords) > 0:
		return submission{kind: formOther} // a registration or password change
	case len(texts) > 0:
		// One field, for the username, is the first step of a login that
		// asks for the password on its next page.
		if u := usernameField(f); len(texts) == 1 && u == texts[0] && (neutral != nil || !hasButton) {
			if c := f.controls[u]; c.autocomplete == "username" || c.autocomplete == "email" || c.typ == "email" || isUserField(c) {
				return submission{kind: formIdentifier, form: f, button: neutral}
			}
		}
		return submission{kind: formOther}
	case approve != nil:
		return submission{kind: formConsent, form: f, button: approve}
	case neutral != nil || !hasButton:
		// Buttons that say neither (or none): the form's hidden fields
		// may say what it does (prompt=consent, approval=approve).
		for _, c := range f.controls {
			if c.typ != "hidden" {
				continue
			}
			switch n := strings.ToLower(c.name); {
			case n == "prompt" || n == "approval" || n == "decision" || n == "consent" || n == "action" || n == "choice" || n == "response":
				if decision(c.value) > 0 {
					return submission{kind: formConsent, form: f, button: neutral}
				}
			}
		}
	}
	return submission{kind: formOther}
}

// isUserField reports whether a field is named or labelled for a username.
func isUserField(c htmlControl) bool {
	for _, w := range words(c.name + " " + c.id + " " + c.label + " " + c.placeholder) {
		if slices.Contains(userWords, w) || strings.HasPrefix(w, "user") || strings.HasSuffix(w, "email") {
			return true
		}
	}
	return false
}

// fillForm sets what a browser sends of a form's controls that nobody
// touched: hidden fields and prefilled values, checked boxes and radio
// buttons, each select's selected (or first) option, and the submitting
// button's name and value. choice, when not empty, is chosen wherever a
// select or a group of radio buttons offers it.
func fillForm(sub submission, form url.Values, skip func(int) bool, choice string) {
	radios := map[string]string{}
	var radioOrder []string
	for i, c := range sub.form.controls {
		switch {
		case c.name == "" || c.disabled || skip(i):
		case c.tag == "button" || c.typ == "submit" || c.typ == "image" || c.typ == "reset" || c.typ == "button" || c.typ == "file":
		case c.typ == "checkbox":
			if c.checked {
				form.Add(c.name, valueOr(c.value, "on"))
			}
		case c.typ == "radio":
			cur, seen := radios[c.name]
			if !seen {
				radioOrder = append(radioOrder, c.name)
			}
			switch v := valueOr(c.value, "on"); {
			case choice != "" && v == choice, !seen, c.checked && cur != choice:
				radios[c.name] = v
			}
		case c.tag == "select":
			v := ""
			if len(c.options) > 0 {
				v = c.options[0]
			}
			if choice != "" && slices.Contains(c.options, choice) {
				v = choice
			}
			form.Add(c.name, v)
		default:
			form.Add(c.name, c.value)
		}
	}
	for _, n := range radioOrder {
		form.Add(n, radios[n])
	}
	if b := sub.button; b != nil && b.name != "" {
		form.Add(b.name, b.value)
	}
}

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// fillLogin fills a login form (or, without password, its username-only
// first step): the username and password fields get the credentials,
// everything else what a browser would send.
func fillLogin(sub submission, form url.Values, creds Credentials, password bool) {
	user := usernameField(sub.form)
	fillForm(sub, form, func(i int) bool {
		c := sub.form.controls[i]
		return i == user || c.typ == "password"
	}, "")
	for i, c := range sub.form.controls {
		switch {
		case c.name == "":
		case i == user:
			form.Set(c.name, creds.Username)
		case c.typ == "password" && password:
			form.Set(c.name, creds.Password)
		}
	}
}

// fillConsent approves a consent form, choosing recordID where the form
// offers a patient choice that includes it.
func fillConsent(sub submission, form url.Values, recordID string) {
	fillForm(sub, form, func(int) bool { return false }, recordID)
}

// chooserLink is a link of a sign-in chooser.
type chooserLink struct {
	url  *url.URL
	text string
}

// skipWords mark links of a chooser that lead to no login, or away from
// it (following them may abort the authorization).
var skipWords = []string{"cancel", "abort", "back", "deny", "decline", "help", "privacy", "terms", "policy", "forgot", "reset",
	"register", "signup", "sign-up", "create", "language", "cookie", "cookies", "about", "contact", "logout"}

// chooserLinks are the links a sign-in chooser offers: those on the
// page's own origin (a provider elsewhere is no password login here),
// other than the page itself and links that lead away from the login.
func chooserLinks(page *url.URL, p *htmlPage) []chooserLink {
	origin, _ := Origin(page.String())
	var out []chooserLink
	for _, l := range p.links {
		u, err := page.Parse(strings.TrimSpace(l.href))
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			continue
		}
		u.Fragment = ""
		if o, _ := Origin(u.String()); o != origin || u.String() == page.String() {
			continue
		}
		if slices.ContainsFunc(words(l.text+" "+u.Path), func(w string) bool { return slices.Contains(skipWords, w) }) {
			continue
		}
		if slices.ContainsFunc(out, func(c chooserLink) bool { return c.url.String() == u.String() }) {
			continue
		}
		out = append(out, chooserLink{url: u, text: l.text})
	}
	return out
}

// followChooser handles a page with no form to drive. A sign-in chooser
// (its links lead to different ways to sign in) is followed to the one
// link that leads to a password login, when exactly one does; following
// a link stops at a redirect off the portal's origin (an external
// identity provider), which is never dialled. Otherwise the login needs
// a browser: ErrUnsupported, saying why.
func (s *session) followChooser(ctx context.Context, ex *exchange, page *htmlPage) (*exchange, error) {
	const op = "sign-in chooser"
	links := chooserLinks(ex.url, page)
	switch {
	case len(links) == 0:
		return nil, s.needsBrowser("login form", page, "")
	case len(links) > maxChooserLinks:
		return nil, s.needsBrowser(op, page, fmt.Sprintf("the page has no form and %d links", len(links)))
	}
	origin, _ := Origin(ex.url.String())
	restore := s.stayOn(origin)
	defer restore()
	var found []*exchange
	var names []string
	for _, l := range links {
		names = append(names, strings.TrimSpace(l.text))
		if err := s.c.checkPublished(op, l.url.String()); err != nil {
			return nil, err
		}
		lex, err := s.do(ctx, op, false, getter(l.url.String(), "text/html"))
		if err != nil {
			return nil, err
		}
		if lex.status < 200 || lex.status > 299 {
			continue
		}
		if k := choose(parseHTML(string(lex.body))).kind; k == formLogin || k == formIdentifier || k == formMFA {
			found = append(found, lex)
		}
		if len(found) > 1 {
			break
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	how := "none of them leads"
	if len(found) > 1 {
		how = "more than one leads"
	}
	return nil, &Error{Kind: ErrUnsupported, Op: op,
		Detail: s.red.detail(fmt.Sprintf("the page offers %d ways to sign in (%s) and %s to a password login; this portal needs a browser-driven login", len(links), strings.Join(names, "; "), how))}
}

// stayOn makes the session's client stop at redirects off origin (which
// it returns unfollowed) until the returned function restores it.
func (s *session) stayOn(origin string) func() {
	saved := s.hc
	hc := *saved
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if o, _ := Origin(req.URL.String()); o != origin {
			return http.ErrUseLastResponse
		}
		return saved.CheckRedirect(req, via)
	}
	s.hc = &hc
	return func() { s.hc = saved }
}
