package peers_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/net/html"

	"github.com/acds-project/acds/internal/testrig/peers"
)

// TestPeers checks, without ACDS's connector, that the rig behaves as the
// software it runs does: the authorization server's discovery and SMART
// configuration, its login and consent pages, its tokens and the patient
// context, the FHIR server's refusal of requests without its tokens, and
// Medplum's engine's answers, counts and gaps.
func TestPeers(t *testing.T) {
	rig := peers.Start(t)
	t.Logf("rig ready in %v (%v ms by phase); FHIR %s, issuer %s", rig.Startup.Round(time.Millisecond), rig.Phases, rig.FHIRBase, rig.Issuer)
	for _, p := range rig.Patients {
		t.Logf("%s: Patient/%s, %d entries loaded, %d in the compartment", p.Name, p.ID, p.Entries, p.Compartment)
	}
	t.Run("Discovery", func(t *testing.T) { testDiscovery(t, rig) })
	t.Run("NoToken", func(t *testing.T) { testNoToken(t, rig) })
	t.Run("Login", func(t *testing.T) { testLogin(t, rig) })
	t.Run("Grants", func(t *testing.T) { testGrants(t, rig) })
	t.Run("Medplum", func(t *testing.T) { testMedplum(t, rig) })
	t.Run("Compartments", func(t *testing.T) { testCompartments(t, rig) })
}

// TestPeersStop: when the test ends, the node process is gone, having
// exited by itself on its stdin closing (Start's cleanup fails the test if
// it had to kill it).
func TestPeersStop(t *testing.T) {
	var pid int
	t.Run("rig", func(t *testing.T) {
		rig := peers.Start(t)
		pid = rig.PID()
		if !alive(pid) {
			t.Fatalf("node %d is not running", pid)
		}
	})
	if alive(pid) {
		t.Fatalf("node %d still runs after its test ended", pid)
	}
}

// alive says whether process pid exists (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func getJSON(t *testing.T, c *http.Client, u, token string, want int) map[string]any {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %.300s", u, resp.StatusCode, want, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("GET %s: %v: %.300s", u, err, b)
	}
	return m
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func testDiscovery(t *testing.T, rig *peers.Rig) {
	c := rig.HTTPClient()
	d := getJSON(t, c, rig.Issuer+"/.well-known/openid-configuration", "", 200)
	if d["issuer"] != rig.Issuer {
		t.Errorf("issuer %v", d["issuer"])
	}
	grants := strs(d["grant_types_supported"])
	if slices.Contains(grants, "password") || !slices.Contains(grants, "authorization_code") || !slices.Contains(grants, "refresh_token") {
		t.Errorf("grant_types_supported %v", grants)
	}
	if got := strs(d["scopes_supported"]); !slices.Equal(got, peers.Scopes) {
		t.Errorf("scopes_supported %v, want %v", got, peers.Scopes)
	}
	if got := strs(d["code_challenge_methods_supported"]); !slices.Equal(got, []string{"S256"}) {
		t.Errorf("code_challenge_methods_supported %v", got)
	}
	if d["authorization_response_iss_parameter_supported"] != true {
		t.Errorf("authorization_response_iss_parameter_supported %v", d["authorization_response_iss_parameter_supported"])
	}
	s := getJSON(t, c, rig.FHIRBase+"/.well-known/smart-configuration", "", 200)
	for _, k := range []string{"issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "grant_types_supported", "scopes_supported", "token_endpoint_auth_methods_supported", "code_challenge_methods_supported"} {
		if fmt.Sprint(s[k]) != fmt.Sprint(d[k]) {
			t.Errorf("smart-configuration %s = %v; discovery says %v", k, s[k], d[k])
		}
	}
	caps := strs(s["capabilities"])
	for _, want := range []string{"launch-standalone", "client-public", "client-confidential-symmetric", "context-standalone-patient", "permission-v1", "permission-v2", "permission-offline"} {
		if !slices.Contains(caps, want) {
			t.Errorf("capabilities %v lack %s", caps, want)
		}
	}
}

func testNoToken(t *testing.T, rig *peers.Rig) {
	c := rig.HTTPClient()
	u := rig.FHIRBase + "/Patient/" + rig.Patients[0].ID
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
		t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// A token with the right claims signed by another key.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := jwt.Signed(sig).Claims(map[string]any{
		"iss": rig.Issuer, "aud": rig.FHIRBase, "sub": rig.Patients[0].Username, "scope": "patient/*.read",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "client_id": rig.Public.ID,
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	getJSON(t, c, u, forged, 401)
	getJSON(t, c, u, "not-a-token", 401)
}

// session drives the authorization server as a browser would, without
// ACDS's connector.
type session struct {
	t      *testing.T
	rig    *peers.Rig
	c      *http.Client
	client peers.Client
}

// page is a fetched HTML page and its first form.
type page struct {
	status int
	url    *url.URL
	action string
	fields url.Values
	inputs []string // names of the form's inputs, hidden ones included
	submit []string // texts of its buttons
}

func (s *session) do(req *http.Request) *http.Response {
	s.t.Helper()
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

// follow GETs u and every redirect until a page, or until a redirect to
// the client's redirect URI, which it returns instead of dialling.
func (s *session) follow(resp *http.Response) (*page, *url.URL) {
	s.t.Helper()
	for range 10 {
		if resp.StatusCode < 300 || resp.StatusCode > 399 {
			return s.read(resp), nil
		}
		resp.Body.Close()
		loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			s.t.Fatal(err)
		}
		if strings.HasPrefix(loc.String(), s.client.RedirectURI) {
			return nil, loc
		}
		req, _ := http.NewRequest("GET", loc.String(), nil)
		resp = s.do(req)
	}
	s.t.Fatal("too many redirects")
	return nil, nil
}

func (s *session) read(resp *http.Response) *page {
	s.t.Helper()
	defer resp.Body.Close()
	doc, err := html.Parse(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		s.t.Fatal(err)
	}
	p := &page{status: resp.StatusCode, url: resp.Request.URL, fields: url.Values{}}
	var form *html.Node
	var walk func(n *html.Node)
	attr := func(n *html.Node, k string) string {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val
			}
		}
		return ""
	}
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(text(c))
		}
		return b.String()
	}
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch {
			case n.Data == "form" && form == nil:
				form = n
				p.action = attr(n, "action")
			case n.Data == "input" && form != nil:
				p.inputs = append(p.inputs, attr(n, "name"))
				if attr(n, "type") == "hidden" {
					p.fields.Set(attr(n, "name"), attr(n, "value"))
				}
			case n.Data == "button" && form != nil:
				p.submit = append(p.submit, strings.TrimSpace(text(n)))
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return p
}

// post submits p's form with extra fields.
func (s *session) post(p *page, extra url.Values) *http.Response {
	s.t.Helper()
	u, err := p.url.Parse(p.action)
	if err != nil {
		s.t.Fatal(err)
	}
	v := url.Values{}
	for k, vs := range p.fields {
		v[k] = vs
	}
	for k, vs := range extra {
		v[k] = vs
	}
	req, _ := http.NewRequest("POST", u.String(), strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return s.do(req)
}

// authorize starts an authorization request and returns the login page.
func (s *session) authorize(scope, state, challenge, prompt string) *page {
	s.t.Helper()
	q := url.Values{
		"response_type": {"code"}, "client_id": {s.client.ID}, "redirect_uri": {s.client.RedirectURI},
		"scope": {scope}, "state": {state}, "aud": {s.rig.FHIRBase},
	}
	if prompt != "" {
		q.Set("prompt", prompt)
	}
	if challenge != "" {
		q.Set("code_challenge", challenge)
		q.Set("code_challenge_method", "S256")
	}
	req, _ := http.NewRequest("GET", s.rig.Issuer+"/auth?"+q.Encode(), nil)
	p, loc := s.follow(s.do(req))
	if loc != nil {
		s.t.Fatalf("redirected to the client at once: %v", loc)
	}
	return p
}

// token exchanges code at the token endpoint.
func (s *session) token(form url.Values) (int, map[string]any) {
	s.t.Helper()
	switch s.client.AuthMethod {
	case "none":
		form.Set("client_id", s.client.ID)
	case "client_secret_post":
		form.Set("client_id", s.client.ID)
		form.Set("client_secret", s.client.Secret)
	}
	req, _ := http.NewRequest("POST", s.rig.Issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if s.client.AuthMethod == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(s.client.ID), url.QueryEscape(s.client.Secret))
	}
	resp := s.do(req)
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, m
}

// login runs the whole flow for patient p and returns the token response.
func login(t *testing.T, rig *peers.Rig, client peers.Client, p peers.Patient, scope string) map[string]any {
	t.Helper()
	return loginPrompt(t, rig, client, p, scope, "")
}

func loginPrompt(t *testing.T, rig *peers.Rig, client peers.Client, p peers.Patient, scope, prompt string) map[string]any {
	t.Helper()
	s := &session{t: t, rig: rig, c: rig.HTTPClient(), client: client}
	verifier := base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("v", 40) + p.ID[:8]))
	sum := sha256.Sum256([]byte(verifier))
	page := s.authorize(scope, "st-"+p.ID[:8], base64.RawURLEncoding.EncodeToString(sum[:]), prompt)
	if page.status != 200 || !slices.Contains(page.inputs, "login") || !slices.Contains(page.inputs, "password") || page.fields.Get("prompt") != "login" {
		t.Fatalf("login page: %d, inputs %v, fields %v", page.status, page.inputs, page.fields)
	}
	// A wrong password: the login page again, with 401.
	again, loc := s.follow(s.post(page, url.Values{"login": {p.Username}, "password": {p.Password + "x"}}))
	if loc != nil || again.status != 401 || !slices.Contains(again.inputs, "password") {
		t.Fatalf("wrong password: redirect %v, page %+v", loc, again)
	}
	consent, loc := s.follow(s.post(again, url.Values{"login": {p.Username}, "password": {p.Password}}))
	if loc != nil {
		t.Fatalf("no consent page: redirected to %v", loc)
	}
	if consent.status != 200 || consent.fields.Get("prompt") != "consent" || !slices.Contains(consent.submit, "Continue") {
		t.Fatalf("consent page: %d, fields %v, buttons %v", consent.status, consent.fields, consent.submit)
	}
	_, loc = s.follow(s.post(consent, nil))
	if loc == nil {
		t.Fatal("the consent was not followed by a redirect to the client")
	}
	q := loc.Query()
	if q.Get("state") != "st-"+p.ID[:8] || q.Get("iss") != rig.Issuer || q.Get("code") == "" {
		t.Fatalf("authorization response %v", loc)
	}
	status, tok := s.token(url.Values{"grant_type": {"authorization_code"}, "code": {q.Get("code")}, "redirect_uri": {client.RedirectURI}, "code_verifier": {verifier}})
	if status != 200 {
		t.Fatalf("token: %d %v", status, tok)
	}
	return tok
}

func testLogin(t *testing.T, rig *peers.Rig) {
	for i, client := range []peers.Client{rig.Public, rig.SecretBasic, rig.SecretPost} {
		p := rig.Patients[i%len(rig.Patients)]
		t.Run(client.AuthMethod, func(t *testing.T) {
			tok := login(t, rig, client, p, "launch/patient patient/*.read")
			if tok["patient"] != p.ID || tok["token_type"] != "Bearer" {
				t.Fatalf("token response %v", tok)
			}
			at := tok["access_token"].(string)
			parsed, err := jwt.ParseSigned(at, []jose.SignatureAlgorithm{jose.ES256})
			if err != nil {
				t.Fatal(err)
			}
			var claims map[string]any
			if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil {
				t.Fatal(err)
			}
			if claims["aud"] != rig.FHIRBase || claims["iss"] != rig.Issuer || claims["scope"] != "patient/*.read" {
				t.Errorf("access token claims %v", claims)
			}
			got := getJSON(t, rig.HTTPClient(), rig.FHIRBase+"/Patient/"+p.ID, at, 200)
			if got["resourceType"] != "Patient" || got["id"] != p.ID {
				t.Errorf("Patient read: %v %v", got["resourceType"], got["id"])
			}
		})
	}
	// offline_access only with prompt=consent (OpenID Connect Core §11, as
	// oidc-provider applies it): without, no refresh token.
	t.Run("offline_access", func(t *testing.T) {
		p := rig.Patients[0]
		if tok := login(t, rig, rig.Public, p, "launch/patient patient/*.read offline_access"); tok["refresh_token"] != nil {
			t.Errorf("a refresh token without prompt=consent: %v", tok["scope"])
		}
		tok := loginPrompt(t, rig, rig.Public, p, "launch/patient patient/*.read offline_access", "consent")
		if tok["refresh_token"] == nil {
			t.Fatalf("no refresh token with prompt=consent: %v", tok)
		}
		s := &session{t: t, rig: rig, c: rig.HTTPClient(), client: rig.Public}
		status, again := s.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}})
		if status != 200 || again["patient"] != p.ID {
			t.Errorf("refresh: %d %v", status, again)
		}
	})
	// With openid (the connector's default scope has it) the access token
	// is still for the FHIR server, and an ID token comes with it.
	t.Run("openid", func(t *testing.T) {
		p := rig.Patients[2]
		tok := login(t, rig, rig.Public, p, "openid fhirUser launch/patient patient/*.read")
		if tok["id_token"] == nil || tok["patient"] != p.ID {
			t.Fatalf("token response %v", tok)
		}
		getJSON(t, rig.HTTPClient(), rig.FHIRBase+"/Patient/"+p.ID, tok["access_token"].(string), 200)
	})
	t.Run("without launch/patient", func(t *testing.T) {
		tok := login(t, rig, rig.Public, rig.Patients[0], "patient/*.rs")
		if _, ok := tok["patient"]; ok {
			t.Errorf("patient context without launch/patient: %v", tok)
		}
		getJSON(t, rig.HTTPClient(), rig.FHIRBase+"/Patient/"+rig.Patients[0].ID, tok["access_token"].(string), 200)
	})
}

func testGrants(t *testing.T, rig *peers.Rig) {
	p := rig.Patients[0]
	s := &session{t: t, rig: rig, c: rig.HTTPClient(), client: rig.SecretBasic}
	status, body := s.token(url.Values{"grant_type": {"password"}, "username": {p.Username}, "password": {p.Password}, "scope": {"patient/*.read"}})
	if status != 400 || body["error"] != "unsupported_grant_type" {
		t.Errorf("password grant: %d %v", status, body)
	}
	bad := rig.SecretBasic
	bad.Secret += "x"
	s.client = bad
	status, body = s.token(url.Values{"grant_type": {"authorization_code"}, "code": {"x"}, "redirect_uri": {bad.RedirectURI}})
	if status != 401 || body["error"] != "invalid_client" {
		t.Errorf("wrong client secret: %d %v", status, body)
	}
	// A public client must use PKCE.
	s.client = rig.Public
	q := url.Values{"response_type": {"code"}, "client_id": {rig.Public.ID}, "redirect_uri": {rig.Public.RedirectURI}, "scope": {"patient/*.read"}, "state": {"s"}}
	req, _ := http.NewRequest("GET", rig.Issuer+"/auth?"+q.Encode(), nil)
	_, loc := s.follow(s.do(req))
	if loc == nil || loc.Query().Get("error") != "invalid_request" {
		t.Errorf("no PKCE: %v", loc)
	}
}

func testMedplum(t *testing.T, rig *peers.Rig) {
	p := rig.Patients[1]
	at := login(t, rig, rig.Public, p, "launch/patient patient/*.read")["access_token"].(string)
	c := rig.HTTPClient()
	base := rig.FHIRBase
	if m := getJSON(t, c, base+"/metadata", at, 200); m["resourceType"] != "Bundle" || m["total"] != 0.0 {
		t.Errorf("metadata: %v total %v, want the empty search Medplum's engine answers", m["resourceType"], m["total"])
	}
	getJSON(t, c, base+"/Patient/"+p.ID+"/$everything", at, 404)
	getJSON(t, c, base+"/Patient/"+p.ID+"/Observation", at, 404)
	if m := getJSON(t, c, base+"/Observation?patient="+p.ID, at, 200); m["total"] != 0.0 {
		t.Errorf("bare-id search matched %v", m["total"])
	}
	want := p.CompartmentByType["Observation"]
	m := getJSON(t, c, base+"/Observation?patient=Patient/"+p.ID, at, 200)
	if m["total"] != float64(want) || len(m["entry"].([]any)) != want {
		t.Errorf("Observation?patient=Patient/id: total %v, %d entries; want %d", m["total"], len(m["entry"].([]any)), want)
	}
	for _, e := range m["entry"].([]any) {
		r := e.(map[string]any)["resource"].(map[string]any)
		if ref := "Observation/" + r["id"].(string); !slices.Contains(p.Members, ref) {
			t.Errorf("%s is not among the compartment's members", ref)
		}
	}
	m = getJSON(t, c, base+"/Observation?patient=Patient/"+p.ID+"&_count=10", at, 200)
	if m["total"] != float64(want) || len(m["entry"].([]any)) != 10 || m["link"] != nil {
		t.Errorf("_count=10: total %v, %d entries, link %v; want %d, 10 and none", m["total"], len(m["entry"].([]any)), m["link"], want)
	}
	m = getJSON(t, c, base+fmt.Sprintf("/Observation?patient=Patient/%s&_count=10&_offset=%d", p.ID, want-3), at, 200)
	if len(m["entry"].([]any)) != 3 {
		t.Errorf("_offset: %d entries, want 3", len(m["entry"].([]any)))
	}
	if e := m["entry"].([]any)[0].(map[string]any); e["fullUrl"] != nil {
		t.Errorf("entries carry a fullUrl: %v", e["fullUrl"])
	}
	req, _ := http.NewRequest("DELETE", base+"/Patient/"+p.ID, nil)
	req.Header.Set("Authorization", "Bearer "+at)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("DELETE: %d, want 405", resp.StatusCode)
	}
}

// testCompartments: the rig's counts, from Medplum's compartment
// searches, agree with the bundles themselves: the Patient and every
// resource that refers to it (every reference in a Synthea bundle is the
// fullUrl of one of its entries).
func testCompartments(t *testing.T, rig *peers.Rig) {
	for _, p := range rig.Patients {
		b, err := os.ReadFile(p.File)
		if err != nil {
			t.Fatal(err)
		}
		var bundle struct {
			Entry []struct {
				FullURL  string          `json:"fullUrl"`
				Resource json.RawMessage `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(b, &bundle); err != nil {
			t.Fatal(err)
		}
		var patientURL string
		for _, e := range bundle.Entry {
			var head struct {
				ResourceType string `json:"resourceType"`
			}
			if json.Unmarshal(e.Resource, &head) == nil && head.ResourceType == "Patient" {
				patientURL = e.FullURL
			}
		}
		n := 0
		for _, e := range bundle.Entry {
			if e.FullURL == patientURL || strings.Contains(string(e.Resource), `"reference":"`+patientURL+`"`) || strings.Contains(string(e.Resource), `"reference": "`+patientURL+`"`) {
				n++
			}
		}
		if patientURL == "" || n != p.Compartment {
			t.Errorf("%s: the bundle has %d resources of the patient (%q); the rig counts %d", p.Name, n, patientURL, p.Compartment)
		}
		if p.Entries != len(bundle.Entry) || p.Compartment >= p.Entries {
			t.Errorf("%s: %d entries created of %d; compartment %d", p.Name, p.Entries, len(bundle.Entry), p.Compartment)
		}
		if len(p.Members) != p.Compartment || !slices.Contains(p.Members, "Patient/"+p.ID) || !slices.IsSorted(p.Members) {
			t.Errorf("%s: members %d (%.3v…), compartment %d", p.Name, len(p.Members), p.Members, p.Compartment)
		}
	}
	seen := map[string]string{}
	for _, p := range rig.Patients {
		for _, ref := range p.Members {
			if other, ok := seen[ref]; ok {
				t.Errorf("%s is in the compartments of %s and %s", ref, other, p.Name)
			}
			seen[ref] = p.Name
		}
	}
}
