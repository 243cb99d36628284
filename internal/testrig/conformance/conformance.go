// Package conformance is a black-box conformance suite for the ACDS v1 API,
// written from the client's specification (SPEC.md, a copy of which is in
// testdata) alone: raw net/http with the literal JSON bodies SPEC shows,
// and every field SPEC names checked for presence and JSON type by
// decoding responses into map[string]any. It deliberately uses neither the
// Go wire types of package acds nor package client, so a renamed or
// re-typed field on the wire fails here even when both ends of the Go code
// agree on it.
//
// Where SPEC shows a gap, the suite uses what DESIGN.md §3 fills it with,
// and says so at each such check: GET /v1/requests/{id} to obtain a
// request's attestation bundle (SPEC §4.6), bearer tokens on POST
// /v1/process, the 202 and 401 status codes and problem+json errors
// (SPEC §5, §7).
//
// Run the suite against any base URL:
//
//	func TestConformance(t *testing.T) {
//		rep := conformance.Run(t, conformance.Config{BaseURL: url, Fetch: target})
//		t.Logf("%d endpoints, %d assertions", len(rep.Endpoints), rep.Assertions)
//	}
package conformance

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Config is what Run needs to reach a service.
type Config struct {
	// BaseURL is SPEC's {base_url}: the paths /v1/… are appended to it.
	// Required.
	BaseURL string
	// Client sends every request (set it for TLS to the service). Zero
	// value: http.DefaultClient.
	Client *http.Client
	// Fetch is a portal the service can reach with valid credentials and
	// a record that exists there, for POST /v1/fetch-and-attest. Required:
	// every field is sent as is.
	Fetch FetchTarget
	// Timeout bounds how long Run waits for each accepted request to
	// finish. Zero value: one minute.
	Timeout time.Duration
}

// FetchTarget is the body of SPEC §2.2: a portal, its credentials and a
// record.
type FetchTarget struct {
	SystemType, PortalURL, Username, Password, RecordID string
}

// Report is what one Run covered.
type Report struct {
	// Endpoints are the "METHOD /path" of SPEC §4 that Run called.
	Endpoints []string
	// Extra are the endpoints Run called from DESIGN.md §3 to fill SPEC's
	// gaps (retrieving a request's attestation bundle).
	Extra []string
	// Assertions is the number of checks Run made, passed or failed.
	Assertions int
}

// The five endpoints of SPEC §4, in its order.
const (
	epAnon    = "POST /v1/auth/anon"
	epFetch   = "POST /v1/fetch-and-attest"
	epProcess = "POST /v1/process"
	epVerify  = "POST /v1/verify"
	epHealth  = "GET /v1/health"
	// epRequest fills SPEC §4.6's gap (DESIGN §3).
	epRequest = "GET /v1/requests/{id}"
)

var specEndpoints = []string{epAnon, epFetch, epProcess, epVerify, epHealth}

// processBody is SPEC §2.3's body exactly as SPEC shows it: data holding a
// FHIR Bundle, and outputFormat fhir_r4.
const processBody = `{
  "data": {
    "resourceType": "Bundle",
    "type": "collection",
    "entry": [
      {
        "fullUrl": "urn:uuid:3f0e7c1a-9b2d-4c8e-a6f1-5d4b3a2c1e0f",
        "resource": {
          "resourceType": "Patient",
          "id": "conformance-1",
          "name": [{"family": "Doe", "given": ["Jane"]}],
          "gender": "female",
          "birthDate": "1961-04-12"
        }
      },
      {
        "fullUrl": "urn:uuid:8a7b6c5d-4e3f-4a1b-9c8d-7e6f5a4b3c2d",
        "resource": {
          "resourceType": "Observation",
          "id": "conformance-2",
          "status": "final",
          "code": {"coding": [{"system": "http://loinc.org", "code": "4548-4", "display": "Hemoglobin A1c/Hemoglobin.total in Blood"}]},
          "subject": {"reference": "urn:uuid:3f0e7c1a-9b2d-4c8e-a6f1-5d4b3a2c1e0f"},
          "effectiveDateTime": "2024-03-01",
          "valueQuantity": {"value": 6.1, "unit": "%", "system": "http://unitsofmeasure.org", "code": "%"}
        }
      }
    ]
  },
  "outputFormat": "fhir_r4"
}`

// fetchBody is SPEC §2.2's flat body with the target's values.
func fetchBody(f FetchTarget) string {
	return `{"systemType": ` + quote(f.SystemType) + `, "portalUrl": ` + quote(f.PortalURL) +
		`, "username": ` + quote(f.Username) + `, "password": ` + quote(f.Password) +
		`, "recordId": ` + quote(f.RecordID) + `}`
}

// quote is v as a JSON string.
func quote(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var (
	uuidShape    = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	dottedThree  = regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	hoursMinutes = regexp.MustCompile(`^\d+h [0-5]\dm$`)
)

// suite is one Run: the configuration, the assertion count and the
// endpoints called. Its subtests run one after the other.
type suite struct {
	cfg        Config
	assertions int
	called     map[string]bool
}

// Run checks the service at cfg.BaseURL against SPEC.md: each endpoint of
// SPEC §4 in a subtest, then the bearer flow of SPEC §5, then POST
// /v1/verify with the attestation bundles of a processed and of a fetched
// record. It logs and returns what it covered. It fails t (without
// stopping) on every deviation, and stops when a later step cannot run
// (no token, no accepted request).
func Run(t *testing.T, cfg Config) Report {
	t.Helper()
	if cfg.BaseURL == "" {
		t.Fatal("conformance: Config.BaseURL is required")
	}
	if f := cfg.Fetch; f.SystemType == "" || f.PortalURL == "" || f.Username == "" || f.Password == "" || f.RecordID == "" {
		t.Fatal("conformance: Config.Fetch needs every field (systemType, portalUrl, username, password, recordId)")
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	s := &suite{cfg: cfg, called: map[string]bool{}}

	t.Run("health", s.health)
	var token string
	t.Run("auth-anon", func(t *testing.T) { token = s.anon(t) })
	if token == "" {
		t.Fatal("conformance: no token from POST /v1/auth/anon; the rest needs one")
	}
	t.Run("bearer", func(t *testing.T) { s.bearer(t, token) })
	var processed, fetched string
	t.Run("process", func(t *testing.T) { processed = s.process(t, token) })
	t.Run("fetch-and-attest", func(t *testing.T) { fetched = s.fetch(t, token) })
	t.Run("verify", func(t *testing.T) { s.verify(t, token, processed, fetched) })

	rep := s.report()
	t.Logf("conformance: %d SPEC endpoints (%s), plus %s from DESIGN; %d assertions",
		len(rep.Endpoints), strings.Join(rep.Endpoints, ", "), strings.Join(rep.Extra, ", "), rep.Assertions)
	return rep
}

func (s *suite) report() Report {
	var r Report
	for _, ep := range specEndpoints {
		if s.called[ep] {
			r.Endpoints = append(r.Endpoints, ep)
		}
	}
	for ep := range s.called {
		if !slices.Contains(specEndpoints, ep) {
			r.Extra = append(r.Extra, ep)
		}
	}
	slices.Sort(r.Extra)
	r.Assertions = s.assertions
	return r
}

// check counts one assertion and reports it on t when it fails.
func (s *suite) check(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	s.assertions++
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

// call is one exchange with the service.
type call struct {
	endpoint string // "METHOD /template", for the report
	method   string
	path     string
	token    string  // sent as "Authorization: Bearer <token>" when set
	auth     string  // sent as the Authorization header as is when set
	body     *string // nil: no body; else sent with Content-Type application/json
}

// response is what came back.
type response struct {
	status int
	header http.Header
	raw    []byte
}

func lit(s string) *string { return &s }

// do sends c; a transport error fails the test at once.
func (s *suite) do(t *testing.T, c call) response {
	t.Helper()
	var body io.Reader
	if c.body != nil {
		body = strings.NewReader(*c.body)
	}
	req, err := http.NewRequest(c.method, s.cfg.BaseURL+c.path, body)
	if err != nil {
		t.Fatalf("%s: %v", c.endpoint, err)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case c.auth != "":
		req.Header.Set("Authorization", c.auth)
	case c.token != "":
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	s.called[c.endpoint] = true
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c.endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		t.Fatalf("%s: reading the response: %v", c.endpoint, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, raw: raw}
}

// object checks that r has status want, a JSON media type and a JSON
// object body, and returns the object (nil when any of that fails).
func (s *suite) object(t *testing.T, what string, r response, want func(int) bool, wantText string) map[string]any {
	t.Helper()
	if !s.check(t, want(r.status), "%s: HTTP %d, want %s; body: %s", what, r.status, wantText, clip(r.raw)) {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	s.check(t, mt == "application/json", "%s: Content-Type %q, want application/json (SPEC: all bodies are JSON)", what, r.header.Get("Content-Type"))
	var obj map[string]any
	if !s.check(t, json.Unmarshal(r.raw, &obj) == nil && obj != nil, "%s: the body is not a JSON object: %s", what, clip(r.raw)) {
		return nil
	}
	return obj
}

func is(code int) func(int) bool { return func(c int) bool { return c == code } }

func success(c int) bool { return c >= 200 && c < 300 }

// str checks that obj has field as a JSON string and returns it.
func (s *suite) str(t *testing.T, what string, obj map[string]any, field string) string {
	t.Helper()
	v, present := obj[field]
	if !s.check(t, present, "%s: field %q is missing", what, field) {
		return ""
	}
	str, ok := v.(string)
	s.check(t, ok, "%s: field %q is %s %v, want a JSON string", what, field, jsonType(v), v)
	return str
}

// boolean checks that obj has field as a JSON boolean and returns it.
func (s *suite) boolean(t *testing.T, what string, obj map[string]any, field string) (value, ok bool) {
	t.Helper()
	v, present := obj[field]
	if !s.check(t, present, "%s: field %q is missing", what, field) {
		return false, false
	}
	b, ok := v.(bool)
	s.check(t, ok, "%s: field %q is %s %v, want a JSON boolean", what, field, jsonType(v), v)
	return b, ok
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func clip(b []byte) string {
	const max = 300
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// health: SPEC §2.7 and §4.5, and §9's version.
func (s *suite) health(t *testing.T) {
	const what = epHealth
	obj := s.object(t, what, s.do(t, call{endpoint: epHealth, method: "GET", path: "/v1/health"}), is(http.StatusOK), "200")
	if obj == nil {
		return
	}
	status := s.str(t, what, obj, "status")
	s.check(t, status == "healthy", "%s: status %q, want healthy", what, status)
	version := s.str(t, what, obj, "version")
	s.check(t, dottedThree.MatchString(version), "%s: version %q is not dotted three-part (%s)", what, version, dottedThree)
	enclave := s.str(t, what, obj, "enclave")
	s.check(t, enclave != "", "%s: enclave is empty, want the enclave technology's name", what)
	uptime := s.str(t, what, obj, "uptime")
	s.check(t, hoursMinutes.MatchString(uptime), "%s: uptime %q is not hours and minutes (%s)", what, uptime, hoursMinutes)
}

// anon: SPEC §2.1 and §4.1. The request carries no fields: both an empty
// JSON object and an empty body (with the JSON Content-Type all the same)
// are such a request. Each opens a new session. It returns the first
// session's token.
func (s *suite) anon(t *testing.T) string {
	var tokens, pseudonyms []string
	for _, body := range []string{`{}`, ``} {
		what := fmt.Sprintf("%s with body %q", epAnon, body)
		r := s.do(t, call{endpoint: epAnon, method: "POST", path: "/v1/auth/anon", body: &body})
		obj := s.object(t, what, r, success, "2xx")
		if obj == nil {
			continue
		}
		p, tok := s.str(t, what, obj, "pseudonym"), s.str(t, what, obj, "token")
		s.check(t, p != "", "%s: pseudonym is empty", what)
		s.check(t, tok != "", "%s: token is empty", what)
		s.check(t, !slices.Contains(tokens, tok) && !slices.Contains(pseudonyms, p),
			"%s: a second session got the same pseudonym or token as the first", what)
		tokens, pseudonyms = append(tokens, tok), append(pseudonyms, p)
	}
	if len(tokens) == 0 {
		return ""
	}
	return tokens[0]
}

// bearer: SPEC §5. The token is welcome on a public endpoint. A request
// to POST /v1/fetch-and-attest (bearer per
// SPEC §4.2) or POST /v1/process (bearer per DESIGN §3) without a token,
// with a token the service never issued, or with the token in another
// scheme is refused with 401 and a problem+json body (DESIGN §3, SPEC §7
// being a gap). That a valid token works is shown by the process and
// fetch-and-attest subtests.
func (s *suite) bearer(t *testing.T, token string) {
	forged := forge(token)
	cases := []struct{ name, auth string }{
		{"no Authorization header", ""},
		{"a garbage bearer token", "Bearer not-a-token"},
		{"a token the service never issued", "Bearer " + forged},
		{"the token in the Basic scheme", "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+token))},
		{"the token without a scheme", token},
	}
	// SPEC §5.2 sends the token on all later requests: GET /v1/health
	// answers with one as without.
	r := s.do(t, call{endpoint: epHealth, method: "GET", path: "/v1/health", token: token})
	if obj := s.object(t, epHealth+" with the bearer token", r, is(http.StatusOK), "200"); obj != nil {
		status := s.str(t, epHealth+" with the bearer token", obj, "status")
		s.check(t, status == "healthy", "%s with the bearer token: status %q, want healthy", epHealth, status)
	}

	bodies := map[string]string{epFetch: fetchBody(s.cfg.Fetch), epProcess: processBody}
	for _, ep := range []string{epFetch, epProcess} {
		for _, tc := range cases {
			what := fmt.Sprintf("%s with %s", ep, tc.name)
			r := s.do(t, call{endpoint: ep, method: "POST", path: strings.TrimPrefix(ep, "POST "), auth: tc.auth, body: lit(bodies[ep])})
			if !s.check(t, r.status == http.StatusUnauthorized, "%s: HTTP %d, want 401; body: %s", what, r.status, clip(r.raw)) {
				continue
			}
			s.problem(t, what, r, http.StatusUnauthorized)
		}
	}
}

// forge returns a token of the same length and alphabet as tok that the
// service did not issue: tok with its last character changed.
func forge(tok string) string {
	if tok == "" {
		return "x"
	}
	last := tok[len(tok)-1]
	repl := byte('A')
	if last == 'A' {
		repl = 'B'
	}
	return tok[:len(tok)-1] + string(repl)
}

// problem checks an error answer's RFC 9457 body (DESIGN §3 fills SPEC
// §7's gap).
func (s *suite) problem(t *testing.T, what string, r response, status int) {
	t.Helper()
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	s.check(t, mt == "application/problem+json", "%s: Content-Type %q, want application/problem+json (DESIGN §3)", what, r.header.Get("Content-Type"))
	var obj map[string]any
	if !s.check(t, json.Unmarshal(r.raw, &obj) == nil && obj != nil, "%s: the problem is not a JSON object: %s", what, clip(r.raw)) {
		return
	}
	typ := s.str(t, what+" (problem)", obj, "type")
	s.check(t, strings.HasPrefix(typ, "urn:acds:problem:"), "%s: problem type %q, want urn:acds:problem:<code>", what, typ)
	s.str(t, what+" (problem)", obj, "title")
	n, ok := obj["status"].(float64)
	s.check(t, ok && int(n) == status, "%s: problem status %v, want the number %d", what, obj["status"], status)
}

// accepted checks SPEC §2.4's answer to a request: 202 (DESIGN §3; SPEC
// shows no code), requestId UUID-shaped, status processing, and message a
// non-empty string when withMessage, absent otherwise. It returns the
// requestId.
func (s *suite) accepted(t *testing.T, what string, r response, withMessage bool) string {
	t.Helper()
	obj := s.object(t, what, r, is(http.StatusAccepted), "202")
	if obj == nil {
		return ""
	}
	id := s.str(t, what, obj, "requestId")
	s.check(t, uuidShape.MatchString(id), "%s: requestId %q is not UUID-shaped", what, id)
	status := s.str(t, what, obj, "status")
	s.check(t, status == "processing", "%s: status %q, want processing (SPEC §3)", what, status)
	if withMessage {
		msg := s.str(t, what, obj, "message")
		s.check(t, strings.TrimSpace(msg) != "", "%s: message is empty, want a human-readable acknowledgement", what)
	} else {
		_, has := obj["message"]
		s.check(t, !has, "%s: has a message field; SPEC §4.3: no message field", what)
	}
	if !uuidShape.MatchString(id) {
		return ""
	}
	return id
}

// process: SPEC §2.3, §2.4 and §4.3 with the bearer token of §5. It
// returns the completed request's attestation bundle.
func (s *suite) process(t *testing.T, token string) string {
	r := s.do(t, call{endpoint: epProcess, method: "POST", path: "/v1/process", token: token, body: lit(processBody)})
	id := s.accepted(t, epProcess, r, false)
	if id == "" {
		t.FailNow()
	}
	return s.bundle(t, token, id)
}

// fetch: SPEC §2.2, §2.4 and §4.2 with the bearer token of §5. It returns
// the completed request's attestation bundle.
func (s *suite) fetch(t *testing.T, token string) string {
	r := s.do(t, call{endpoint: epFetch, method: "POST", path: "/v1/fetch-and-attest", token: token, body: lit(fetchBody(s.cfg.Fetch))})
	id := s.accepted(t, epFetch, r, true)
	if id == "" {
		t.FailNow()
	}
	return s.bundle(t, token, id)
}

// bundle waits for request id to end and returns its attestation bundle:
// GET /v1/requests/{id} fills SPEC §4.6's gap (DESIGN §3: a record with
// status processing, completed or failed, and result.attestationBundle).
// A second session must not see the request (DESIGN §3: owner only, else
// 404).
func (s *suite) bundle(t *testing.T, token, id string) string {
	t.Helper()
	what := epRequest + " " + id
	deadline := time.Now().Add(s.cfg.Timeout)
	var rec map[string]any
	for {
		r := s.do(t, call{endpoint: epRequest, method: "GET", path: "/v1/requests/" + id, token: token})
		if r.status == http.StatusTooManyRequests {
			wait, _ := strconv.Atoi(r.header.Get("Retry-After"))
			time.Sleep(time.Duration(max(wait, 1)) * time.Second)
			continue
		}
		if rec = s.object(t, what, r, is(http.StatusOK), "200"); rec == nil {
			t.FailNow()
		}
		if rec["status"] != "processing" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	status := s.str(t, what, rec, "status")
	if !s.check(t, status == "completed", "%s: status %q, want completed (waited up to %v); record: %s", what, status, s.cfg.Timeout, clip(mustJSON(rec))) {
		t.FailNow()
	}
	result, ok := rec["result"].(map[string]any)
	if !s.check(t, ok, "%s: result is %s, want an object", what, jsonType(rec["result"])) {
		t.FailNow()
	}
	b64 := s.str(t, what+" result", result, "attestationBundle")
	_, err := base64.StdEncoding.DecodeString(b64)
	s.check(t, b64 != "" && err == nil, "%s: result.attestationBundle is not base64: %v", what, err)

	// Another session's token does not reach the request.
	other := s.anonToken(t)
	r := s.do(t, call{endpoint: epRequest, method: "GET", path: "/v1/requests/" + id, token: other})
	s.check(t, r.status == http.StatusNotFound, "%s with another session's token: HTTP %d, want 404 (DESIGN §3: owner only)", what, r.status)
	return b64
}

// anonToken opens one more session, quietly (anon checks the answer).
func (s *suite) anonToken(t *testing.T) string {
	t.Helper()
	r := s.do(t, call{endpoint: epAnon, method: "POST", path: "/v1/auth/anon", body: lit(`{}`)})
	var obj struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(r.raw, &obj); err != nil || obj.Token == "" {
		t.Fatalf("%s: HTTP %d %s", epAnon, r.status, clip(r.raw))
	}
	return obj.Token
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// verify: SPEC §2.5, §2.6 and §4.4 with the bundles of a processed and of
// a fetched record. The service's verifier trusts its own enclave and its
// own notary, so both are valid; only the fetched one's MPC-TLS part
// applies (DESIGN §3: for a raw submission mpcTlsVerified is false). A
// bundle with one byte changed is never valid (400 or valid false).
func (s *suite) verify(t *testing.T, token, processed, fetched string) {
	// SPEC does not say POST /v1/verify takes the bearer header (DESIGN:
	// it needs none); it is sent with and without one.
	for _, tc := range []struct {
		name, bundle, token string
		mpcTLS              bool
	}{
		{"processed record", processed, "", false},
		{"fetched record", fetched, token, true},
	} {
		if tc.bundle == "" {
			continue // its subtest failed already
		}
		what := fmt.Sprintf("%s (%s)", epVerify, tc.name)
		body := `{"attestationBundle": ` + quote(tc.bundle) + `}`
		obj := s.object(t, what, s.do(t, call{endpoint: epVerify, method: "POST", path: "/v1/verify", token: tc.token, body: &body}), is(http.StatusOK), "200")
		if obj == nil {
			continue
		}
		got := map[string]bool{}
		for _, f := range []string{"valid", "enclaveHashMatch", "mpcTlsVerified", "teeQuoteVerified"} {
			got[f], _ = s.boolean(t, what, obj, f)
		}
		s.check(t, got["valid"], "%s: valid false for the service's own bundle; details: %s", what, clip(mustJSON(obj["details"])))
		s.check(t, got["enclaveHashMatch"], "%s: enclaveHashMatch false for the service's own bundle", what)
		s.check(t, got["teeQuoteVerified"], "%s: teeQuoteVerified false for the service's own bundle", what)
		s.check(t, got["mpcTlsVerified"] == tc.mpcTLS, "%s: mpcTlsVerified %v, want %v", what, got["mpcTlsVerified"], tc.mpcTLS)
	}

	// A tampered bundle: its middle byte changed.
	if b, err := base64.StdEncoding.DecodeString(processed); err == nil && len(b) > 0 {
		b[len(b)/2] ^= 0x01
		body := `{"attestationBundle": ` + quote(base64.StdEncoding.EncodeToString(b)) + `}`
		what := epVerify + " (a bundle with one byte changed)"
		r := s.do(t, call{endpoint: epVerify, method: "POST", path: "/v1/verify", body: &body})
		if r.status == http.StatusBadRequest {
			s.problem(t, what, r, http.StatusBadRequest)
		} else if obj := s.object(t, what, r, is(http.StatusOK), "200 or 400"); obj != nil {
			valid, ok := s.boolean(t, what, obj, "valid")
			s.check(t, ok && !valid, "%s: valid true", what)
		}
	}
	// Not base64 at all: refused (DESIGN §3: 400).
	what := epVerify + " (not base64)"
	r := s.do(t, call{endpoint: epVerify, method: "POST", path: "/v1/verify", body: lit(`{"attestationBundle": "%%% not base64 %%%"}`)})
	if s.check(t, r.status == http.StatusBadRequest, "%s: HTTP %d, want 400 (DESIGN §3)", what, r.status) {
		s.problem(t, what, r, http.StatusBadRequest)
	}
}
