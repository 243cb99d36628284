package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// FuzzParseHTML feeds the login-page reader arbitrary pages: it must not
// panic, and it finds no more forms than the page opens.
func FuzzParseHTML(f *testing.F) {
	f.Add(`<form method="post" action="/auth/login"><input type="hidden" name="csrf_token" value="a&amp;b"><input name=username><input type=password name='password'></form>`)
	f.Add(`<form id=consent><select name=patient><option value=a>A<option value="b" selected>B</select><button name=decision value=allow>ok</button></form>`)
	f.Add(`<p data-error="account-locked">x</p><!-- <form> --><script>var s = "<form>";</script>`)
	f.Add(`<form<input<select<option</form></select>`)
	f.Add(`<a b="unterminated`)
	f.Add(`<input name=x value=1><option value=2>`)
	f.Fuzz(func(t *testing.T, doc string) {
		p := parseHTML(doc)
		if n := strings.Count(strings.ToLower(doc), "<form"); len(p.forms) > n {
			t.Fatalf("%d forms from %d <form", len(p.forms), n)
		}
		for _, fm := range p.forms {
			fm.has(func(c htmlControl) bool { return isOTP(c.name) })
		}
	})
}

// FuzzParseHostAddr: numeric host parsing never panics, and whatever it
// accepts the guard can decide on.
func FuzzParseHostAddr(f *testing.F) {
	for _, s := range []string{"2130706433", "0177.0.0.1", "0x7f.1", "127.1", "[::1]", "[fe80::1%25eth0]", "::ffff:127.0.0.1",
		"portal.example", "1.2.3.4.5", "0x", "08", "4294967295", "4294967296", "1.2.3.", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		a, err := ParseHostAddr(host)
		if err != nil {
			return
		}
		if !a.IsValid() {
			t.Fatalf("%q: accepted an invalid address", host)
		}
		strict := Guard{}.CheckAddr(a)
		if a.Unmap().IsLoopback() && strict == nil {
			t.Fatalf("%q (%s): loopback allowed", host, a)
		}
		if (Guard{}).Control("tcp", netip.AddrPortFrom(a.WithZone(""), 443).String(), nil) == nil && strict != nil {
			t.Fatalf("%q: Control and CheckAddr disagree", host)
		}
	})
}

// bodyTransport answers every request with the same status and body, in
// memory.
type bodyTransport struct {
	status int
	body   []byte
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: b.status, Header: http.Header{"Content-Type": {"application/fhir+json"}},
		Body: io.NopCloser(bytes.NewReader(b.body)), Request: r, ContentLength: int64(len(b.body))}, nil
}

// FuzzConnectorPages feeds the connector arbitrary portal answers (as
// $everything pages, Patient reads, searches and reference reads): it must
// not panic or loop, and it returns either a JSON Bundle holding the
// patient or a classified error.
func FuzzConnectorPages(f *testing.F) {
	f.Add(200, []byte(`{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Patient","id":"p1"}}]}`))
	f.Add(200, []byte(`{"resourceType":"Bundle","link":[{"relation":"next","url":"https://portal.example/fhir/x"}],"entry":[{"resource":{"resourceType":"Patient","id":"p1"}}]}`))
	f.Add(200, []byte(`{"resourceType":"Bundle","link":[{"relation":"next","url":"https://evil.example/x"}]}`))
	f.Add(200, []byte(`{"resourceType":"Patient","id":"p1","generalPractitioner":[{"reference":"Practitioner/x"}]}`))
	f.Add(404, []byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found"}]}`))
	f.Add(401, []byte(`{"resourceType":"OperationOutcome","issue":[{"code":"lock-error","details":{"coding":[{"code":"mfa-required"}]}}]}`))
	f.Add(200, []byte(`{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Patient","id":"../x"}}]}`))
	f.Add(200, []byte(`{"resourceType":"Bund`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 599 {
			status = 200
		}
		c := &Connector{MaxRetries: -1, MaxPages: 20, MaxBytes: 1 << 20}
		hc := &http.Client{Transport: bodyTransport{status: status, body: body}}
		rec, err := c.Fetch(context.Background(), hc, Request{SystemType: SystemFHIRBasic, PortalURL: "https://portal.example/fhir", RecordID: "p1", Credentials: demoCreds})
		if err != nil {
			if ProblemCode(err) == ProblemInternal {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if !json.Valid(rec.FHIR) || !strings.Contains(string(rec.FHIR), `"fullUrl":"https://portal.example/fhir/Patient/p1"`) {
			t.Fatalf("bad record %s", rec.FHIR)
		}
	})
}

// FuzzResourceHeader checks the fast header scan against encoding/json
// (with exact, case-sensitive keys as FHIR JSON has them) on valid JSON,
// and that it never panics on anything else.
func FuzzResourceHeader(f *testing.F) {
	for _, s := range []string{`{"resourceType":"Patient","id":"p1"}`, `{"a":{"id":"x"},"id":"y","resourceType":"Obs\u0065rvation"}`,
		`{"id":1}`, `{"x":[1,{"y":"}"}],"id":"a\"b"}`, ` { "resourceType" : "A" , "id" : "b" } `, `[]`, `{"id":"a"`, `{"resourceType":"A","resourceType":"B"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, id, err := resourceHeader(b)
		var m map[string]any
		if !json.Valid(b) || json.Unmarshal(b, &m) != nil {
			return // only valid JSON objects have an oracle
		}
		ts, tok := m["resourceType"].(string)
		is, iok := m["id"].(string)
		if (m["resourceType"] != nil && !tok) || (m["id"] != nil && !iok) {
			if err == nil {
				t.Fatalf("non-string field accepted: %q %q", typ, id)
			}
			return
		}
		if err != nil || typ != ts || id != is {
			t.Fatalf("scan %q %q %v; encoding/json %q %q", typ, id, err, ts, is)
		}
	})
}
