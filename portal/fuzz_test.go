package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds"
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
	for _, page := range []string{dexPasswordPage, dexApprovalPage, dexChooserPage, oidcLoginPage, oidcConsentPage, busyLoginPage,
		identifierPage, totpPage, denyOnlyPage, orphanButtonPage} {
		f.Add(page)
	}
	f.Add(`<label>a<label>b<input name=x></label><button form=nope>x</button><a href=/y><a href=/z>z</a></a><div role=alert><div>e</div>`)
	f.Add(`<textarea name=t>x<form></textarea><form><textarea name=u>y</textarea><button formaction=/a formmethod=get>b</button></form>`)
	f.Fuzz(func(t *testing.T, doc string) {
		p := parseHTML(doc)
		if n := strings.Count(strings.ToLower(doc), "<form"); len(p.forms) > n {
			t.Fatalf("%d forms from %d <form", len(p.forms), n)
		}
		for _, fm := range p.forms {
			sub := classify(fm)
			if sub.kind != formOther && sub.form != fm {
				t.Fatalf("classified as %d without its form", sub.kind)
			}
			if sub.form != nil {
				vals := url.Values{}
				fillLogin(sub, vals, testCreds, sub.kind == formLogin)
				fillConsent(sub, vals, "p1")
			}
		}
		if len(p.text) > maxPageText || len(p.links) > maxLinks || len(p.errors) > maxPageErrors {
			t.Fatalf("kept %d bytes of text, %d links, %d errors", len(p.text), len(p.links), len(p.errors))
		}
		base, _ := url.Parse("https://portal.example/login")
		chooserLinks(base, p)
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

// loginTransport answers SMART discovery with a usable configuration and
// every other request (the authorization request, each form posted, each
// link followed, the token request) with the same status and body, in
// memory.
type loginTransport bodyTransport

func (l loginTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/.well-known/smart-configuration") {
		return bodyTransport{status: 200, body: []byte(`{"issuer":"https://portal.example","authorization_endpoint":"https://portal.example/authorize",` +
			`"token_endpoint":"https://portal.example/token","grant_types_supported":["authorization_code","password"]}`)}.RoundTrip(r)
	}
	return bodyTransport(l).RoundTrip(r)
}

// FuzzConnectorPages feeds the connector arbitrary portal answers (as
// $everything pages, Patient reads, searches and reference reads for
// fhir-basic; as login, consent and chooser pages and token answers for
// smart-form): it must not panic or loop, and it returns either a JSON
// Bundle holding the patient or a classified error.
func FuzzConnectorPages(f *testing.F) {
	for _, page := range []string{dexPasswordPage, dexApprovalPage, dexChooserPage, oidcLoginPage, oidcConsentPage, busyLoginPage,
		identifierPage, totpPage, orphanButtonPage} {
		f.Add(200, []byte(page))
		f.Add(401, []byte(page))
	}
	f.Add(400, []byte(`<pre>error: invalid_redirect_uri</pre>`))
	f.Add(200, []byte(`<div id="root"></div><script src="/app.js"></script>`))
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
		for st, tr := range map[string]http.RoundTripper{
			acds.SystemFHIRBasic: bodyTransport{status: status, body: body},
			acds.SystemSMARTForm: loginTransport{status: status, body: body},
		} {
			c := &Connector{MaxRetries: -1, MaxPages: 20, MaxBytes: 1 << 20}
			rec, err := c.Fetch(context.Background(), &http.Client{Transport: tr}, Request{SystemType: st, PortalURL: "https://portal.example/fhir", RecordID: "p1", Credentials: testCreds})
			if err != nil {
				if ProblemCode(err) == acds.ProblemInternal {
					t.Fatalf("%s: unclassified error: %v", st, err)
				}
				if strings.Contains(err.Error(), testCreds.Password) {
					t.Fatalf("%s: the error quotes the password: %v", st, err)
				}
				continue
			}
			if !json.Valid(rec.FHIR) || !strings.Contains(string(rec.FHIR), `"fullUrl":"https://portal.example/fhir/Patient/p1"`) {
				t.Fatalf("%s: bad record %s", st, rec.FHIR)
			}
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

// FuzzScanPage checks the page walk against encoding/json with exact,
// case-sensitive keys (a map decode) on every input: both accept or both
// refuse it, and they find the same type, next link and entries, each
// entry's resource byte for byte, with the type and id resourceHeader
// reads from it.
func FuzzScanPage(f *testing.F) {
	for _, s := range []string{
		`{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Patient","id":"p1"}}]}`,
		`{"resourceType":"Bundle","link":[{"relation":"self","url":"a"},{"relation":"next","url":"b"}],"entry":[{"search":{"mode":"outcome"},"resource":{"resourceType":"OperationOutcome"}},null,{"resource":null},{}]}`,
		` { "resourc\u0065Type" : "Bundle" , "entry" : [ { "resource" : { "id" : "x" } } ] , "entry" : null } `,
		`{"resourceType":"Bundle","Entry":[{"resource":{}}]}`, `{"entry":{}}`, `{"entry":[1]}`, `{"link":[{"url":1}]}`,
		`{"resourceType":1}`, `{"entry":[{"search":"x"}]}`, `[]`, `{"resourceType":"Bund`, `{"a":"\"}"}`,
		`{"resourceType":"Bundle","total":3}`, `{"total":-1}`, `{"total":1.5}`, `{"total":"2"}`, `{"total":null,"total":7}`, `{"total":1e2}`,
		`{"entry":[{"resource":{"resourceType":1,"id":"a"}},{"resource":[1]},{"resource":"x"},{"resource":{"i\u0064":"b","resourceType":"A"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := scanPage(b)
		want, werr := pageByEncodingJSON(b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("scanPage error %v, encoding/json error %v", err, werr)
		}
		if err != nil {
			return
		}
		if (p.resourceType == "Bundle") != (want.resourceType == "Bundle") || p.next != want.next || p.total != want.total || len(p.entries) != len(want.entries) {
			t.Fatalf("scanPage %q %q %d entries; encoding/json %q %q %d", p.resourceType, p.next, len(p.entries),
				want.resourceType, want.next, len(want.entries))
		}
		for i := range p.entries {
			if !bytes.Equal(p.entries[i].resource, want.entries[i].resource) || p.entries[i].outcome != want.entries[i].outcome || p.entries[i].include != want.entries[i].include {
				t.Fatalf("entry %d: scanPage %q %v; encoding/json %q %v", i, p.entries[i].resource, p.entries[i].outcome,
					want.entries[i].resource, want.entries[i].outcome)
			}
			if r := p.entries[i].resource; r != nil {
				typ, id, err := resourceHeader(r)
				if typ != p.entries[i].typ || id != p.entries[i].id || (err == nil) != (p.entries[i].headerErr == nil) {
					t.Fatalf("entry %d header %q %q %v; resourceHeader %q %q %v", i, p.entries[i].typ, p.entries[i].id,
						p.entries[i].headerErr, typ, id, err)
				}
			}
		}
	})
}

// pageByEncodingJSON is FuzzScanPage's oracle.
func pageByEncodingJSON(b []byte) (*page, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errors.New("not an object")
	}
	p := page{total: -1}
	if v, ok := top["total"]; ok {
		var n *int
		if err := json.Unmarshal(v, &n); err != nil {
			return nil, err
		}
		if n != nil && *n >= 0 {
			p.total = *n
		}
	}
	if v, ok := top["resourceType"]; ok {
		if err := json.Unmarshal(v, &p.resourceType); err != nil {
			return nil, err
		}
	}
	if v, ok := top["link"]; ok {
		var links []struct{ Relation, URL string }
		if err := json.Unmarshal(v, &links); err != nil {
			return nil, err
		}
		for _, l := range links {
			if l.Relation == "next" {
				p.next = l.URL
			}
		}
	}
	if v, ok := top["entry"]; ok {
		var entries []map[string]json.RawMessage
		if err := json.Unmarshal(v, &entries); err != nil {
			return nil, err
		}
		for _, e := range entries {
			var pe pageEntry
			if r, ok := e["resource"]; ok && string(r) != "null" {
				pe.resource = r
			}
			if s, ok := e["search"]; ok {
				var m *struct{ Mode string }
				if err := json.Unmarshal(s, &m); err != nil {
					return nil, err
				}
				pe.outcome = m != nil && m.Mode == "outcome"
				pe.include = m != nil && m.Mode == "include"
			}
			p.entries = append(p.entries, pe)
		}
	}
	return &p, nil
}

// FuzzParseRegistrations: a registrations file never panics the parser,
// and whatever it accepts CheckRegistrations accepts too (the file and
// Go decide alike).
func FuzzParseRegistrations(f *testing.F) {
	f.Add([]byte(`[{"origin": "https://a.example", "clientId": "a", "redirectUri": "https://acds.example/cb", "scopes": ["openid"]}]`))
	f.Add([]byte(`[{"origin": "https://A.example:443/", "clientId": "a", "redirectUri": "https://x/cb"}, {"origin": "http://[::1]:80"}]`))
	f.Add([]byte(`[{"origin": "https://a.example", "clientId": "a", "redirectUri": "https://x/cb", "privateKeyFile": "k.pem", "keyId": "k"}]`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[{"origin": "https://a.example", "clientId": "a", "redirectUri": "https://x/cb", "clientSecretFile": "s.txt"}]`))
	f.Add([]byte(`[{"origin": "https://a.example", "clientId": "a", "redirectUri": "https://x/cb", "clientSecretFile": "s.txt", "privateKeyFile": "k.pem"}]`))
	f.Add([]byte(`[{"origin": "https://a.example", "clientId": "a", "redirectUri": "https://x/cb", "clientSecretFile": "s.txt", "tokenEndpointAuthMethod": "client_secret_post"}]`))
	dir := f.TempDir()
	os.WriteFile(filepath.Join(dir, "s.txt"), []byte("a-client-secret\n"), 0o600)
	f.Fuzz(func(t *testing.T, data []byte) {
		regs, err := parseRegistrations(data, dir)
		if err != nil {
			var re *RegistrationError
			if !errors.As(err, &re) {
				t.Fatalf("%T is not a *RegistrationError", err)
			}
			return
		}
		if err := CheckRegistrations(regs); err != nil {
			t.Fatalf("the file gave registrations that CheckRegistrations refuses: %v", err)
		}
	})
}
