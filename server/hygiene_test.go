package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
)

// rawDo sends a request without a body to the harness server's path,
// after build has set its headers, and returns the answer and its body.
func rawDo(t *testing.T, h *harness, method, path string, build func(*http.Request)) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	build(req)
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestTwoAuthorizationHeaders: a request with two Authorization fields is
// refused whatever their order, never served under the first token.
func TestTwoAuthorizationHeaders(t *testing.T) {
	h := newHarness(t, nil)
	s := h.anon()
	for name, values := range map[string][]string{
		"garbage first": {"Bearer garbage", "Bearer " + s.Token},
		"valid first":   {"Bearer " + s.Token, "Bearer garbage"},
		"same twice":    {"Bearer " + s.Token, "Bearer " + s.Token},
	} {
		resp, b := rawDo(t, h, "GET", "/v1/requests", func(r *http.Request) {
			for _, v := range values {
				r.Header.Add("Authorization", v)
			}
		})
		p := wantProblem(t, resp, b, acds.ProblemUnauthorized)
		if !strings.Contains(p.Detail, "more than one Authorization header") {
			t.Errorf("%s: detail %q", name, p.Detail)
		}
		if strings.Contains(string(b), s.Token) {
			t.Errorf("%s: the problem quotes the token", name)
		}
	}
	if resp, b := h.do("GET", "/v1/requests", s.Token, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("one Authorization header: %d %s", resp.StatusCode, b)
	}
}

// TestListRefusesRepeatedParameters: GET /v1/requests refuses a repeated
// limit or cursor, naming the field, as GET /v1/requests/{id} refuses a
// repeated wait.
func TestListRefusesRepeatedParameters(t *testing.T) {
	h := newHarness(t, nil)
	s := h.anon()
	for query, field := range map[string]string{
		"limit=1&limit=2":         "limit",
		"limit=1&limit=1":         "limit",
		"cursor=a&cursor=b":       "cursor",
		"limit=5&cursor=&cursor=": "cursor",
	} {
		resp, b := h.do("GET", "/v1/requests?"+query, s.Token, nil)
		p := wantProblem(t, resp, b, acds.ProblemInvalidRequest)
		if len(p.Errors) != 1 || p.Errors[0].Field != field || !strings.Contains(p.Detail, "more than once") {
			t.Errorf("%s: %s", query, b)
		}
	}
	if resp, b := h.do("GET", "/v1/requests?limit=2", s.Token, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("one limit: %d %s", resp.StatusCode, b)
	}
}

// TestContentTypeCharset: a JSON body declared in a charset other than
// UTF-8 is refused (415), while utf-8 in any case, no charset, and +json
// types are accepted; the 415 names what is accepted.
func TestContentTypeCharset(t *testing.T) {
	h := newHarness(t, nil)
	s := h.anon()
	for _, ct := range []string{
		"application/json; charset=iso-8859-1",
		"application/json;charset=utf-16",
		"application/fhir+json; charset=latin1",
		`application/json; charset="us-ascii"`,
	} {
		resp, b := h.do("POST", "/v1/process", s.Token, processBody("fhir_r4"), "Content-Type", ct)
		p := wantProblem(t, resp, b, acds.ProblemUnsupportedMediaType)
		if !strings.Contains(p.Detail, "charset") || !strings.Contains(p.Detail, "UTF-8") {
			t.Errorf("%s: detail %q", ct, p.Detail)
		}
	}
	for _, ct := range []string{
		"application/json",
		"application/json; charset=utf-8",
		"application/json; charset=UTF-8",
		"application/fhir+json",
		"application/fhir+json; charset=utf-8",
	} {
		if resp, b := h.do("POST", "/v1/process", s.Token, processBody("fhir_r4"), "Content-Type", ct); resp.StatusCode != http.StatusAccepted {
			t.Errorf("%s: %d %s", ct, resp.StatusCode, b)
		}
	}
	resp, b := h.do("POST", "/v1/process", s.Token, processBody("fhir_r4"), "Content-Type", "text/plain")
	p := wantProblem(t, resp, b, acds.ProblemUnsupportedMediaType)
	if !strings.Contains(p.Detail, "+json") {
		t.Errorf("text/plain: the detail does not say +json types are accepted: %q", p.Detail)
	}
}

// TestContentEncodingRefused: a body with a Content-Encoding other than
// identity is refused with 415 on every JSON endpoint, before it is read,
// instead of being parsed as raw JSON (invalid-json).
func TestContentEncodingRefused(t *testing.T) {
	h := newHarness(t, nil)
	s := h.anon()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"data":` + sampleBundle + `,"outputFormat":"fhir_r4"}`))
	_ = zw.Close()
	for _, c := range []struct{ method, path, token, coding, want string }{
		{"POST", "/v1/process", s.Token, "gzip", "Content-Encoding gzip is not supported; send the body uncompressed"},
		{"POST", "/v1/process", s.Token, "identity, gzip", "Content-Encoding gzip"},
		{"POST", "/v1/process", s.Token, "x<script>", "Content-Encoding other than identity"},
		{"POST", "/v1/verify", "", "br", "Content-Encoding br"},
		{"POST", "/v1/auth/anon", "", "deflate", "Content-Encoding deflate"},
		{"POST", "/v1/fetch-and-attest", s.Token, "gzip", "Content-Encoding gzip"},
	} {
		resp, b := h.do(c.method, c.path, c.token, gz.Bytes(), "Content-Encoding", c.coding)
		p := wantProblem(t, resp, b, acds.ProblemUnsupportedMediaType)
		if !strings.Contains(p.Detail, c.want) {
			t.Errorf("%s %s: detail %q, want it to hold %q", c.path, c.coding, p.Detail, c.want)
		}
		if strings.Contains(p.Detail, "<script>") {
			t.Errorf("the detail repeats a coding that is not a token: %q", p.Detail)
		}
	}
	if resp, b := h.do("POST", "/v1/process", s.Token, processBody("fhir_r4"), "Content-Encoding", "identity"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("identity: %d %s", resp.StatusCode, b)
	}
}

// TestByteOrderMarkNamed: a JSON body that starts with a UTF-8 byte order
// mark is still invalid-json, and the answer says why, on the one-pass
// decoder of POST /v1/process and on encoding/json's (POST /v1/verify).
func TestByteOrderMarkNamed(t *testing.T) {
	h := newHarness(t, nil)
	s := h.anon()
	bom := "\xEF\xBB\xBF"
	for _, c := range []struct{ path, token, body string }{
		{"/v1/process", s.Token, bom + `{"data":` + sampleBundle + `,"outputFormat":"fhir_r4"}`},
		{"/v1/verify", "", bom + `{"attestationBundle":"aGVsbG8="}`},
		{"/v1/auth/revoke", s.Token, bom + `{}`},
	} {
		resp, b := h.do("POST", c.path, c.token, c.body)
		p := wantProblem(t, resp, b, acds.ProblemInvalidJSON)
		if !strings.Contains(p.Detail, "byte order mark") {
			t.Errorf("%s: detail %q", c.path, p.Detail)
		}
	}
}

// TestStalledUploadCountsAsAborted: a stalled upload cut by the body
// timeout gets no answer; /metrics counts it under code "aborted", not
// 200, and one info line names its endpoint and nothing of the request.
func TestStalledUploadCountsAsAborted(t *testing.T) {
	h := newHarness(t, func(c *server.Config) {
		c.BodyIdleTimeout = 200 * time.Millisecond
		c.BodyTimeout = time.Second
	})
	s := h.anon()
	conn, err := net.Dial("tcp", h.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST /v1/process HTTP/1.1\r\nHost: acds\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"data\":", s.Token); err != nil {
		t.Fatal(err)
	}
	if got := readUntilClosed(t, conn, 10*time.Second); got != "" {
		t.Fatalf("a stalled upload was answered: %q", got)
	}
	var metrics string
	deadline := time.Now().Add(5 * time.Second)
	for { // the handler's deferred count may land just after the close
		resp, b := h.do("GET", "/metrics", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/metrics: %d", resp.StatusCode)
		}
		metrics = string(b)
		if strings.Contains(metrics, `endpoint="/v1/process"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(metrics, `acds_http_requests_total{code="aborted",endpoint="/v1/process",method="POST"} 1`) {
		t.Errorf("the stalled upload is not counted as aborted:\n%s", grepLines(metrics, "acds_http_requests_total"))
	}
	if strings.Contains(metrics, `acds_http_requests_total{code="200",endpoint="/v1/process"`) {
		t.Errorf("the stalled upload is counted as 200:\n%s", grepLines(metrics, "acds_http_requests_total"))
	}
	logs := h.logs.String()
	if !strings.Contains(logs, `"msg":"request aborted`) || !strings.Contains(logs, `"endpoint":"/v1/process"`) {
		t.Errorf("no log line for the aborted request:\n%s", logs)
	}
	if strings.Contains(logs, s.Token) {
		t.Errorf("the log quotes the token")
	}
}

// grepLines returns the lines of text that contain substr.
func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestCallbackErrorsWordedForCallbacks: a refused callbackUrl is worded
// as a callback error, not a portal one, keeps the problem code the
// endpoint used (forbidden-portal for a refused target), and never
// quotes user information.
func TestCallbackErrorsWordedForCallbacks(t *testing.T) {
	h := realHarness(t, newRealEnclave(t), nil) // the default guard: public https only
	s := h.anon()
	for _, c := range []struct{ url, code, want string }{
		{"https://127.0.0.1/hook", acds.ProblemForbiddenPortal, "callbackUrl: the address 127.0.0.1 is not allowed for callbacks (loopback address; loopback, private, link-local and metadata addresses are refused)"},
		{"https://[::ffff:169.254.169.254]/", acds.ProblemForbiddenPortal, "the address ::ffff:169.254.169.254 is not allowed for callbacks"},
		{"https://localhost/hook", acds.ProblemForbiddenPortal, "the host localhost is not allowed for callbacks"},
		{"http://receiver.example/hook", acds.ProblemForbiddenPortal, `callbackUrl: the URL's scheme "http" is not allowed (https only)`},
		{"https://user:pw@receiver.example/", acds.ProblemInvalidRequest, "callbackUrl: not a valid callback URL: must not carry user information"},
	} {
		resp, b := h.do("POST", "/v1/process", s.Token, map[string]any{"data": json.RawMessage(validFHIRBundle), "outputFormat": "fhir_r4", "callbackUrl": c.url})
		p := wantProblem(t, resp, b, c.code)
		if !strings.Contains(p.Detail, c.want) {
			t.Errorf("%s: detail %q, want it to hold %q", c.url, p.Detail, c.want)
		}
		if len(p.Errors) != 1 || p.Errors[0].Field != "callbackUrl" || strings.HasPrefix(p.Errors[0].Message, "callbackUrl") {
			t.Fatalf("%s: errors %+v", c.url, p.Errors)
		}
		// The type and title stay forbidden-portal's; the text is the callback's.
		if strings.Contains(p.Detail, "portal") || strings.Contains(p.Errors[0].Message, "portal") {
			t.Errorf("%s: worded as a portal error: %s", c.url, b)
		}
		if strings.Contains(string(b), ":pw@") {
			t.Errorf("the problem quotes the user information: %s", b)
		}
	}
}
