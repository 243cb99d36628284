package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// TestEveryProblemCode provokes every problem code of the v1 contract with
// a real request and checks status, media type, stable type and detail.
func TestEveryProblemCode(t *testing.T) {
	h := newHarness(t, func(c *server.Config) {
		c.MaxProcessBody = 4096
		c.MaxBody = 1024
		c.Pipeline = &servertest.Pipeline{Hook: func(_ context.Context, in []byte) error {
			if strings.Contains(string(in), "boom") {
				return errors.New("pipeline exploded")
			}
			return nil
		}}
		c.Fetcher = &servertest.Fetcher{AdmitFunc: func(r portal.Request) error {
			if strings.Contains(r.PortalURL, "refused.example") {
				return fmt.Errorf("refused by the test's rule: %w", portal.ErrForbidden)
			}
			return nil
		}}
	})
	noVerifier := newHarness(t, func(c *server.Config) { c.Verifier, c.Fetcher = nil, nil })
	noVerifierTok := noVerifier.anon().Token
	s := h.anon()
	tok := s.Token
	valid := func(format string) string {
		return `{"data":{"resourceType":"Bundle","type":"collection"},"outputFormat":"` + format + `"}`
	}
	fetch := func(systemType, url string) string {
		return fmt.Sprintf(`{"systemType":%q,"portalUrl":%q,"recordId":"1","username":"u","password":"p","outputFormat":"fhir_r4"}`, systemType, url)
	}
	type tc struct {
		name       string
		h          *harness
		method     string
		path       string
		token      string
		body       any
		headers    []string
		code       string
		wantField  string
		wantDetail string
	}
	cases := []tc{
		{name: "malformed json", method: "POST", path: "/v1/process", token: tok, body: `{"data":`, code: acds.ProblemInvalidJSON},
		{name: "syntax error", method: "POST", path: "/v1/process", token: tok, body: `{"data" 1}`, code: acds.ProblemInvalidJSON},
		{name: "empty body", method: "POST", path: "/v1/process", token: tok, body: ``, code: acds.ProblemInvalidJSON},
		{name: "unknown field", method: "POST", path: "/v1/process", token: tok, body: `{"data":{"resourceType":"Bundle"},"outputFormat":"fhir_r4","extra":1}`, code: acds.ProblemInvalidRequest, wantField: "extra"},
		// No aliases: the names used before the wire followed SPEC.md are unknown fields.
		{name: "old process name bundle", method: "POST", path: "/v1/process", token: tok, body: `{"bundle":{"resourceType":"Bundle"},"outputFormat":"fhir_r4"}`, code: acds.ProblemInvalidRequest, wantField: "bundle"},
		{name: "old nested credentials", method: "POST", path: "/v1/fetch-and-attest", token: tok, body: `{"systemType":"demo","portalUrl":"https://p.example","recordId":"1","credentials":{"username":"u","password":"p"}}`, code: acds.ProblemInvalidRequest, wantField: "credentials"},
		{name: "old verify name bundle", method: "POST", path: "/v1/verify", body: `{"bundle":"aGVsbG8="}`, code: acds.ProblemInvalidRequest, wantField: "bundle"},
		{name: "wrong type", method: "POST", path: "/v1/process", token: tok, body: `{"data":{"resourceType":"Bundle"},"outputFormat":7}`, code: acds.ProblemInvalidRequest, wantField: "outputFormat"},
		{name: "credential wrong type", method: "POST", path: "/v1/fetch-and-attest", token: tok, body: `{"systemType":"demo","portalUrl":"https://p.example","recordId":"1","username":1,"password":"p","outputFormat":"fhir_r4"}`, code: acds.ProblemInvalidRequest, wantField: "username"},
		{name: "trailing data", method: "POST", path: "/v1/process", token: tok, body: valid("fhir_r4") + `{}`, code: acds.ProblemInvalidRequest},
		// A member named twice is refused, not decided by whichever value
		// comes last (a proxy in front may read the first).
		{name: "duplicate outputFormat", method: "POST", path: "/v1/process", token: tok, body: `{"data":{"resourceType":"Bundle","type":"collection"},"outputFormat":"pdf","outputFormat":"fhir_r4"}`, code: acds.ProblemInvalidRequest, wantField: "outputFormat"},
		{name: "duplicate data", method: "POST", path: "/v1/process", token: tok, body: `{"data":{"resourceType":"Patient"},"outputFormat":"fhir_r4","data":{"resourceType":"Bundle","type":"collection"}}`, code: acds.ProblemInvalidRequest, wantField: "data"},
		{name: "duplicate attestationBundle", method: "POST", path: "/v1/verify", body: `{"attestationBundle":"aGVsbG8=","attestationBundle":"d29ybGQ="}`, code: acds.ProblemInvalidRequest, wantField: "attestationBundle"},
		{name: "duplicate passphrase", method: "POST", path: "/v1/auth/anon", body: `{"passphrase":"a long enough passphrase 1","passphrase":"a long enough passphrase 2"}`, code: acds.ProblemInvalidRequest, wantField: "passphrase"},
		// encoding/json matches names case-insensitively: so does the check.
		{name: "duplicate username by case", method: "POST", path: "/v1/fetch-and-attest", token: tok, body: `{"systemType":"demo","portalUrl":"https://p.example","recordId":"1","username":"u","Username":"v","password":"p","outputFormat":"fhir_r4"}`, code: acds.ProblemInvalidRequest, wantField: "Username"},
		{name: "not an object", method: "POST", path: "/v1/process", token: tok, body: `[1,2]`, code: acds.ProblemInvalidRequest},
		{name: "missing field", method: "POST", path: "/v1/process", token: tok, body: `{"data":{"resourceType":"Bundle"}}`, code: acds.ProblemInvalidRequest, wantField: "outputFormat"},
		{name: "bundle not object", method: "POST", path: "/v1/process", token: tok, body: `{"data":"x","outputFormat":"fhir_r4"}`, code: acds.ProblemInvalidRequest, wantField: "data"},
		{name: "short passphrase", method: "POST", path: "/v1/auth/anon", body: `{"passphrase":"abc"}`, code: acds.ProblemInvalidRequest, wantField: "passphrase"},
		{name: "verify not base64", method: "POST", path: "/v1/verify", body: `{"attestationBundle":"%%%"}`, code: acds.ProblemInvalidRequest, wantField: "attestationBundle"},
		{name: "verify not a bundle", method: "POST", path: "/v1/verify", body: `{"attestationBundle":"aGVsbG8="}`, code: acds.ProblemInvalidRequest, wantField: "attestationBundle"},
		{name: "bad limit", method: "GET", path: "/v1/requests?limit=1000", token: tok, code: acds.ProblemInvalidRequest, wantField: "limit"},
		{name: "text/plain", method: "POST", path: "/v1/process", token: tok, body: valid("fhir_r4"), headers: []string{"Content-Type", "text/plain"}, code: acds.ProblemUnsupportedMediaType},
		{name: "form content type", method: "POST", path: "/v1/verify", body: `{"attestationBundle":"aGVsbG8="}`, headers: []string{"Content-Type", "application/x-www-form-urlencoded"}, code: acds.ProblemUnsupportedMediaType},
		{name: "no content type is read as JSON", method: "POST", path: "/v1/verify", body: `{"attestationBundle":"aGVsbG8="}`, headers: []string{"Content-Type", ""}, code: acds.ProblemInvalidRequest, wantField: "attestationBundle"},
		{name: "too large by length", method: "POST", path: "/v1/process", token: tok, body: `{"data":{"resourceType":"Bundle","x":"` + strings.Repeat("a", 5000) + `"},"outputFormat":"fhir_r4"}`, code: acds.ProblemPayloadTooLarge},
		{name: "auth body too large", method: "POST", path: "/v1/auth/anon", body: `{"passphrase":"` + strings.Repeat("a", 2000) + `"}`, code: acds.ProblemPayloadTooLarge},
		{name: "no token", method: "GET", path: "/v1/requests", code: acds.ProblemUnauthorized},
		{name: "malformed token", method: "GET", path: "/v1/requests", token: "acds_short", code: acds.ProblemUnauthorized},
		{name: "unknown token", method: "GET", path: "/v1/requests", token: "acds_" + strings.Repeat("A", 43), code: acds.ProblemUnauthorized},
		{name: "basic auth", method: "GET", path: "/v1/requests", headers: []string{"Authorization", "Basic dTpw"}, code: acds.ProblemUnauthorized},
		{name: "unknown request", method: "GET", path: "/v1/requests/6f1c1f2e-9a55-4c38-9d4b-2f0e4f8a1b2c", token: tok, code: acds.ProblemNotFound},
		{name: "not a uuid", method: "GET", path: "/v1/requests/..%2f", token: tok, code: acds.ProblemNotFound},
		{name: "unknown path", method: "GET", path: "/v2/health", code: acds.ProblemNotFound},
		// Not a redirect with an HTML body, as http.ServeMux would answer.
		{name: "doubled slash", method: "GET", path: "//v1/health", code: acds.ProblemNotFound, wantDetail: "did you mean /v1/health?"},
		{name: "dot segment", method: "POST", path: "/v1/./process", token: tok, body: valid("fhir_r4"), code: acds.ProblemNotFound, wantDetail: "/v1/process"},
		{name: "wrong method", method: "PUT", path: "/v1/health", code: acds.ProblemMethodNotAllowed},
		{name: "system type", method: "POST", path: "/v1/fetch-and-attest", token: tok, body: fetch("epic-mychart", "https://p.example"), code: acds.ProblemUnsupportedSystemType, wantField: "systemType", wantDetail: "fhir-basic"},
		{name: "output format", method: "POST", path: "/v1/process", token: tok, body: valid("pdf"), code: acds.ProblemUnsupportedOutputFormat, wantField: "outputFormat", wantDetail: "fhir_r4_deidentified"},
		{name: "invalid fhir", method: "POST", path: "/v1/process", token: tok, body: `{"data":{"type":"collection"},"outputFormat":"fhir_r4"}`, code: acds.ProblemInvalidFHIR},
		// Which portals are refused is the Fetcher's rule (Admit; the real
		// one is tested through package service): here a fake refuses one.
		{name: "forbidden portal", method: "POST", path: "/v1/fetch-and-attest", token: tok, body: fetch("demo", "https://refused.example"), code: acds.ProblemForbiddenPortal, wantField: "portalUrl"},
		{name: "no fetcher", h: noVerifier, method: "POST", path: "/v1/fetch-and-attest", token: noVerifierTok, body: fetch("demo", "https://p.example"), code: acds.ProblemUnavailable},
		// /v1/verify carries the output it checks, so it has the /v1/process limit, not MaxBody.
		{name: "verify body too large", method: "POST", path: "/v1/verify", body: `{"attestationBundle":"aGVsbG8=","output":"` + strings.Repeat("a", 5000) + `"}`, code: acds.ProblemPayloadTooLarge},
		{name: "verify body above MaxBody is read", method: "POST", path: "/v1/verify", body: `{"attestationBundle":"!","output":"` + strings.Repeat("a", 2000) + `"}`, code: acds.ProblemInvalidRequest, wantField: "attestationBundle"},
		{name: "no verifier", h: noVerifier, method: "POST", path: "/v1/verify", body: `{"attestationBundle":"aGVsbG8="}`, code: acds.ProblemUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hh := c.h
			if hh == nil {
				hh = h
			}
			resp, b := hh.do(c.method, c.path, c.token, c.body, c.headers...)
			p := wantProblem(t, resp, b, c.code)
			if c.wantField != "" {
				found := false
				for _, e := range p.Errors {
					found = found || e.Field == c.wantField
				}
				if !found {
					t.Errorf("errors %+v do not name %q", p.Errors, c.wantField)
				}
			}
			if c.wantDetail != "" && !strings.Contains(p.Detail, c.wantDetail) {
				t.Errorf("detail %q does not mention %q", p.Detail, c.wantDetail)
			}
			if c.code == acds.ProblemUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer")
			}
			if c.code == acds.ProblemInvalidFHIR && len(p.OperationOutcome) == 0 {
				t.Errorf("invalid-fhir without an OperationOutcome")
			}
			if c.code == acds.ProblemMethodNotAllowed && resp.Header.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
		})
	}

	// internal: the pipeline fails unexpectedly; the request ends failed.
	t.Run("internal", func(t *testing.T) {
		resp, b := h.do("POST", "/v1/process", tok, `{"data":{"resourceType":"Bundle","id":"boom"},"outputFormat":"fhir_r4"}`)
		if resp.StatusCode != 202 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		r := h.wait(tok, decode[acds.Accepted](t, b).RequestID, 5*time.Second)
		if r.Status != acds.StatusFailed || r.Error.Code() != acds.ProblemInternal || strings.Contains(r.Error.Detail, "exploded") {
			t.Fatalf("request = %+v, error %+v", r, r.Error)
		}
	})
	// rate-limited: per token and per address, with Retry-After.
	t.Run("rate-limited", func(t *testing.T) {
		rl := newHarness(t, func(c *server.Config) { c.RateLimit = 1; c.AuthRateLimit = 0.5 })
		s := rl.anon()
		var last *http.Response
		var lb []byte
		for range 5 {
			last, lb = rl.do("GET", "/v1/requests", s.Token, nil)
		}
		wantProblem(t, last, lb, acds.ProblemRateLimited)
		if n, err := strconv.Atoi(last.Header.Get("Retry-After")); err != nil || n < 1 {
			t.Fatalf("Retry-After = %q", last.Header.Get("Retry-After"))
		}
		// Another token is not limited by the first.
		if resp, b := rl.do("GET", "/v1/requests", rl.anon().Token, nil); resp.StatusCode != 200 {
			t.Fatalf("second token: %d %s", resp.StatusCode, b)
		}
		for range 10 {
			last, lb = rl.do("POST", "/v1/auth/anon", "", nil)
		}
		wantProblem(t, last, lb, acds.ProblemRateLimited)
		if last.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	})
	// Verification has a bucket of its own per address: using it up
	// leaves the address's sessions alone, and the other way round.
	t.Run("verify-rate-limited", func(t *testing.T) {
		rl := newHarness(t, func(c *server.Config) { c.AuthRateLimit = 0.5; c.VerifyRateLimit = 1 })
		verify := func() (*http.Response, []byte) {
			return rl.do("POST", "/v1/verify", "", acds.VerifyRequest{AttestationBundle: "AAAA"})
		}
		for i := range 5 { // the burst: five times the rate
			if resp, b := verify(); resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("verify %d: %d %s", i, resp.StatusCode, b)
			}
		}
		resp, b := verify()
		wantProblem(t, resp, b, acds.ProblemRateLimited)
		if resp.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		if resp, b := rl.do("POST", "/v1/auth/anon", "", nil); resp.StatusCode != http.StatusCreated {
			t.Fatalf("anon after verification used its bucket: %d %s", resp.StatusCode, b)
		}
		for range 10 {
			resp, b = rl.do("POST", "/v1/auth/anon", "", nil)
		}
		wantProblem(t, resp, b, acds.ProblemRateLimited)
	})
}

// countingReader is an endless body that counts what the server read.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	c.n += int64(len(p))
	return len(p), nil
}

func TestTooLargeIsNotReadWhole(t *testing.T) {
	srv, err := server.New(server.Config{Store: servertest.NewMemStore(), Workers: -1, RateLimit: -1, MaxProcessBody: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	// Anonymous session through the handler itself.
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/auth/anon", nil))
	sess := decode[acds.Session](t, rec.Body.Bytes())

	// A chunked (unknown length) body of "infinite" size.
	body := &countingReader{}
	req := httptest.NewRequest("POST", "/v1/process", io.MultiReader(strings.NewReader(`{"data":{"resourceType":"Bundle","x":"`), body))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+sess.Token)
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if body.n > 2*(64<<10) {
		t.Fatalf("the server read %d bytes of a body limited to %d", body.n, 64<<10)
	}
}
