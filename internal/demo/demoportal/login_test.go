package demoportal_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/internal/demo/demoportal/demoportaltest"
	"github.com/acds-project/acds/portal"
	"golang.org/x/net/html"
)

// TestDemoLoginFormChecks drives the demo's App Launch endpoints by hand:
// the CSRF token and cookie are checked, PKCE is enforced, codes are
// single-use, and a patient-context token reads only its patient.
func TestDemoLoginFormChecks(t *testing.T) {
	p := demoportaltest.Start(t, demoportal.Options{Patients: 2})
	origin := strings.TrimSuffix(p.URL, "/fhir")
	verifier := strings.Repeat("v", 43)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {portal.DemoClientID}, "redirect_uri": {portal.DemoRedirectURI},
		"state": {"st"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	get := func(hc *http.Client, u string) (*http.Response, string) {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	jarClient := func() *http.Client {
		hc := *p.Client
		hc.Jar = newJar()
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return &hc
	}
	// An unregistered redirect URI is refused without a redirect.
	bad := url.Values{}
	for k, v := range q {
		bad[k] = v
	}
	bad.Set("redirect_uri", "https://evil.example/cb")
	if resp, _ := get(jarClient(), origin+"/auth/authorize?"+bad.Encode()); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unregistered redirect: %d", resp.StatusCode)
	}
	// No PKCE, no login page.
	noPKCE := url.Values{}
	for k, v := range q {
		noPKCE[k] = v
	}
	noPKCE.Del("code_challenge")
	if resp, _ := get(jarClient(), origin+"/auth/authorize?"+noPKCE.Encode()); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no PKCE: %d", resp.StatusCode)
	}

	hc := jarClient()
	_, page := get(hc, origin+"/auth/authorize?"+q.Encode())
	vals := fillForm(t, page, "")
	post := func(hc *http.Client, path string, v url.Values) (*http.Response, string) {
		resp, err := hc.PostForm(origin+path, v)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	// Wrong CSRF token, or no session cookie: refused.
	wrong := url.Values{}
	for k, v := range vals {
		wrong[k] = v
	}
	wrong.Set("csrf_token", "forged")
	if resp, _ := post(hc, "/auth/login", wrong); resp.StatusCode != http.StatusForbidden {
		t.Errorf("forged CSRF token: %d", resp.StatusCode)
	}
	if resp, _ := post(jarClient(), "/auth/login", vals); resp.StatusCode != http.StatusForbidden {
		t.Errorf("no session cookie: %d", resp.StatusCode)
	}
	resp, page := post(hc, "/auth/login", vals)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `name="decision"`) {
		t.Fatalf("login: %d %s", resp.StatusCode, page)
	}
	vals = fillForm(t, page, demoportal.PatientID(1))
	resp, _ = post(hc, "/auth/consent", vals)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	code := loc.Query().Get("code")
	if resp.StatusCode != http.StatusFound || code == "" || loc.Query().Get("state") != "st" {
		t.Fatalf("consent: %d %s", resp.StatusCode, loc)
	}
	tokenReq := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {portal.DemoRedirectURI},
		"client_id": {portal.DemoClientID}, "code_verifier": {strings.Repeat("w", 43)}}
	if resp, _ := post(hc, "/auth/token", tokenReq); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("wrong verifier: %d", resp.StatusCode)
	}
	tokenReq.Set("code_verifier", verifier)
	if resp, _ := post(hc, "/auth/token", tokenReq); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("code reused after a failed exchange: %d", resp.StatusCode)
	}

	// A fresh run, choosing demoportal.PatientID(1) at consent, gives a token whose
	// patient context is that patient and which reads no other.
	hc = jarClient()
	_, page = get(hc, origin+"/auth/authorize?"+q.Encode())
	_, page = post(hc, "/auth/login", fillForm(t, page, demoportal.PatientID(1)))
	resp, _ = post(hc, "/auth/consent", fillForm(t, page, demoportal.PatientID(1)))
	loc, _ = url.Parse(resp.Header.Get("Location"))
	tokenReq.Set("code", loc.Query().Get("code"))
	resp, body := post(hc, "/auth/token", tokenReq)
	var tok struct {
		AccessToken string `json:"access_token"`
		Patient     string `json:"patient"`
	}
	if err := json.Unmarshal([]byte(body), &tok); err != nil || resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("code exchange: %d %s", resp.StatusCode, body)
	}
	if tok.Patient != demoportal.PatientID(1) {
		t.Errorf("patient context %q", tok.Patient)
	}
	req, _ := http.NewRequest("GET", p.URL+"/Patient/"+demoportal.PatientID(0), nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	r2, err := p.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusNotFound {
		t.Errorf("a patient-context token read another patient: %d", r2.StatusCode)
	}
}

func newJar() http.CookieJar {
	j, _ := cookiejar.New(nil)
	return j
}

// fillForm fills the first form of a login or consent page the way a
// person would: hidden fields kept, the demo login in the text and
// password fields, patient chosen where the form offers it (else its
// first option), and the "allow" decision.
func fillForm(t testing.TB, page, patient string) url.Values {
	t.Helper()
	vals := url.Values{}
	z := html.NewTokenizer(strings.NewReader(page))
	inForm, userSet, sel, first := false, false, "", true
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		a := map[string]string{}
		for _, at := range tok.Attr {
			a[at.Key] = at.Val
		}
		switch {
		case tt == html.EndTagToken && tok.Data == "form":
			if inForm {
				return vals
			}
		case tt == html.EndTagToken && tok.Data == "select":
			sel = ""
		case tok.Data == "form":
			inForm = true
		case !inForm || a["name"] == "" && tok.Data != "option":
		case tok.Data == "input" && a["type"] == "hidden":
			vals.Set(a["name"], a["value"])
		case tok.Data == "input" && a["type"] == "password":
			vals.Set(a["name"], demoportal.Password)
		case tok.Data == "input" && !userSet:
			vals.Set(a["name"], demoportal.Username)
			userSet = true
		case tok.Data == "select":
			sel, first = a["name"], true
		case tok.Data == "option" && sel != "":
			if first || a["value"] == patient {
				vals.Set(sel, a["value"])
			}
			first = false
		case a["name"] == "decision" && a["value"] == "allow":
			vals.Set("decision", "allow")
		}
	}
	if !inForm {
		t.Fatalf("no form in %s", page)
	}
	return vals
}
