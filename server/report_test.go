package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/verify"
	"github.com/acds-project/acds/verify/report"
)

// realEnclave is a simulated enclave and the verifier a server built on
// it uses (its own installation trusted, as service.Open does).
type realEnclave struct {
	enclave  *attestation.Enclave
	verifier *verify.Verifier
}

// newRealEnclave makes a simulated installation in a temporary
// directory and the verifier a server on it uses.
func newRealEnclave(t testing.TB) *realEnclave {
	t.Helper()
	b, err := sim.NewBackend(filepath.Join(t.TempDir(), "enclave"), sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := verify.TrustEnclave(verify.Policy{}, e.BootEvidence(), e.Measurement())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return &realEnclave{enclave: e, verifier: v}
}

// realHarness is a server on enclave e with the real FHIR pipeline and
// the verifier of package verify.
func realHarness(t *testing.T, e *realEnclave, mod func(*server.Config)) *harness {
	return newHarness(t, func(c *server.Config) {
		c.Enclave = server.AttestationEnclave(e.enclave, nil)
		c.Pipeline = server.FHIRPipeline{}
		c.Verifier = server.Verify(e.verifier)
		if mod != nil {
			mod(c)
		}
	})
}

// processed runs one real /v1/process request and returns its result.
func processed(t *testing.T, h *harness) *acds.Result {
	t.Helper()
	_, b := h.do("POST", "/v1/auth/anon", "", nil)
	s := decode[acds.Session](t, b)
	_, b = h.do("POST", "/v1/process", s.Token, map[string]any{"data": json.RawMessage(validFHIRBundle), "outputFormat": acds.OutputFHIRR4})
	r := h.wait(s.Token, decode[acds.Accepted](t, b).RequestID, 10*time.Second)
	if r.Result == nil {
		t.Fatalf("the request did not complete: %+v", r)
	}
	return r.Result
}

// validFHIRBundle passes the real pipeline: a patient and two
// observations of one code.
const validFHIRBundle = `{"resourceType":"Bundle","type":"collection","entry":[
 {"fullUrl":"urn:uuid:4b1c6a36-2f3c-4f59-9a3e-6c1d3f1a0001","resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Doe"}]}},
 {"fullUrl":"urn:uuid:4b1c6a36-2f3c-4f59-9a3e-6c1d3f1a0002","resource":{"resourceType":"Observation","id":"o1","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"15074-8","display":"Glucose"}]},"subject":{"reference":"Patient/p1"},"effectiveDateTime":"2024-01-01","valueQuantity":{"value":5.2,"unit":"mmol/L"}}},
 {"fullUrl":"urn:uuid:4b1c6a36-2f3c-4f59-9a3e-6c1d3f1a0003","resource":{"resourceType":"Observation","id":"o2","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"15074-8","display":"Glucose"}]},"subject":{"reference":"Patient/p1"},"effectiveDateTime":"2024-03-01","valueQuantity":{"value":6.1,"unit":"mmol/L"}}}]}`

// upload posts the report page's form.
func upload(t *testing.T, h *harness, fields map[string][]byte) (*http.Response, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, v := range fields {
		w, err := mw.CreateFormFile(name, name+".txt")
		if err != nil {
			t.Fatal(err)
		}
		w.Write(v)
	}
	mw.Close()
	resp, b := h.do("POST", "/verify", "", body.Bytes(), "Content-Type", mw.FormDataContentType())
	return resp, string(b)
}

var (
	pageVerdict  = regexp.MustCompile(`id="verdict" data-valid="(true|false)">`)
	pageResponse = regexp.MustCompile(`(?s)<pre id="response">(.*?)</pre>`)
	pageError    = regexp.MustCompile(`<p class="error" id="error">([^<]*)</p>`)
)

func checkPageHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); csp != report.CSP(true) || !strings.HasPrefix(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q, want %q", csp, report.CSP(true))
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", resp.Header)
	}
}

// TestReportPage: GET /verify is the upload form; POST /verify answers
// the report of the same verification POST /v1/verify makes (its JSON
// object is in the page), valid for the server's own output, invalid for
// another output, a tampered bundle and another installation's
// simulated bundle; bad uploads are refused with a page that says why.
func TestReportPage(t *testing.T) {
	h := realHarness(t, newRealEnclave(t), nil)
	res := processed(t, h)
	bundle := []byte(res.AttestationBundle)

	resp, b := h.do("GET", "/verify", "", nil)
	checkPageHeaders(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `enctype="multipart/form-data"`) || strings.Contains(string(b), `id="verdict"`) {
		t.Fatalf("GET /verify: %d\n%s", resp.StatusCode, b)
	}

	raw, err := base64.StdEncoding.DecodeString(res.AttestationBundle)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := attestation.ParseBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Statement = bytes.Clone(parsed.Statement)
	parsed.Statement[len(parsed.Statement)-1] ^= 1 // the claims signature
	tampered, err := parsed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	other := realHarness(t, newRealEnclave(t), nil)
	otherBundle := []byte(processed(t, other).AttestationBundle)

	pretty, _ := json.MarshalIndent(res.Output, "", "   ")
	for _, c := range []struct {
		name   string
		fields map[string][]byte
		valid  bool
		want   string
	}{
		{"genuine with output", map[string][]byte{"attestationBundle": bundle, "output": pretty}, true, "6.1 mmol/L"},
		{"genuine, CBOR, no output", map[string][]byte{"attestationBundle": raw}, true, "root (ARK)"},
		{"another output", map[string][]byte{"attestationBundle": bundle, "output": []byte(`{"resourceType":"Bundle","type":"collection"}`)}, false, "NO: this output is not the attested one"},
		{"tampered", map[string][]byte{"attestationBundle": tampered}, false, "claims signature does not verify"},
		{"another installation", map[string][]byte{"attestationBundle": otherBundle}, false, "evidence"},
	} {
		resp, page := upload(t, h, c.fields)
		checkPageHeaders(t, resp)
		m := pageVerdict.FindStringSubmatch(page)
		if resp.StatusCode != 200 || m == nil {
			t.Fatalf("%s: %d, no verdict\n%s", c.name, resp.StatusCode, page)
		}
		if (m[1] == "true") != c.valid || !strings.Contains(page, c.want) {
			t.Errorf("%s: valid=%s, want %v and %q", c.name, m[1], c.valid, c.want)
		}
		// The same verification as POST /v1/verify.
		req := acds.VerifyRequest{AttestationBundle: base64.StdEncoding.EncodeToString(mustReadBundle(t, c.fields["attestationBundle"]))}
		if o := c.fields["output"]; o != nil {
			req.Output = o
		}
		_, jb := h.do("POST", "/v1/verify", "", req)
		var api, fromPage acds.VerifyResponse
		pm := pageResponse.FindStringSubmatch(page)
		if pm == nil || json.Unmarshal(jb, &api) != nil || json.Unmarshal([]byte(html.UnescapeString(pm[1])), &fromPage) != nil {
			t.Fatalf("%s: responses: %s / %v", c.name, jb, pm)
		}
		a, _ := json.Marshal(api)
		p, _ := json.Marshal(fromPage)
		if string(a) != string(p) {
			t.Errorf("%s: POST /v1/verify says %s, the page %s", c.name, a, p)
		}
	}

	// Refused uploads: a page with the reason, never a verdict.
	for _, c := range []struct {
		name   string
		fields map[string][]byte
		status int
	}{
		{"no bundle", map[string][]byte{"output": pretty}, 400},
		{"junk", map[string][]byte{"attestationBundle": []byte("not a bundle at all")}, 400},
		{"output not JSON", map[string][]byte{"attestationBundle": bundle, "output": []byte("{")}, 400},
		{"unknown field", map[string][]byte{"attestationBundle": bundle, "x": []byte("1")}, 400},
	} {
		resp, page := upload(t, h, c.fields)
		checkPageHeaders(t, resp)
		if resp.StatusCode != c.status || pageError.FindString(page) == "" || pageVerdict.MatchString(page) {
			t.Errorf("%s: %d, want %d with an error and no verdict\n%s", c.name, resp.StatusCode, c.status, page)
		}
	}
	resp, _ = h.do("POST", "/verify", "", `{"attestationBundle":"aGVsbG8="}`)
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("JSON to the page: %d, want 415", resp.StatusCode)
	}
}

func mustReadBundle(t *testing.T, b []byte) []byte {
	t.Helper()
	raw, err := attestation.ReadBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestReportPageLimits: an upload larger than the limits is refused with
// 413 before it is read whole, and a server whose Verifier is not
// package verify's serves no page (503), as POST /v1/verify without a
// verifier.
// TestReportPageDisclosure: POST /verify takes a disclosure alone, verifies
// it as POST /v1/verify does and lists the disclosed entries; a tampered
// one fails its check and lists none; a disclosure sent with a bundle is
// refused.
func TestReportPageDisclosure(t *testing.T) {
	h := realHarness(t, newRealEnclave(t), nil)
	res := processed(t, h)
	bundle, err := base64.StdEncoding.DecodeString(res.AttestationBundle)
	if err != nil {
		t.Fatal(err)
	}
	key, err := base64.StdEncoding.DecodeString(res.DisclosureKey)
	if err != nil || len(key) == 0 {
		t.Fatalf("disclosure key %q: %v", res.DisclosureKey, err)
	}
	d, err := disclosure.New(bundle, key, res.Output, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	disc, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	resp, page := upload(t, h, map[string][]byte{"disclosure": disc})
	checkPageHeaders(t, resp)
	if m := pageVerdict.FindStringSubmatch(page); resp.StatusCode != http.StatusOK || m == nil || m[1] != "true" ||
		!strings.Contains(page, `id="disclosed"`) || !strings.Contains(page, "Observation/") {
		t.Fatalf("disclosure: %d\n%s", resp.StatusCode, page)
	}
	tampered := bytes.Replace(disc, []byte(`"final"`), []byte(`"amended"`), 1)
	if bytes.Equal(tampered, disc) {
		t.Fatal("the test disclosure has no status to tamper with")
	}
	resp, page = upload(t, h, map[string][]byte{"disclosure": tampered})
	if m := pageVerdict.FindStringSubmatch(page); resp.StatusCode != http.StatusOK || m == nil || m[1] != "false" ||
		strings.Contains(page, `id="disclosed"`) || !strings.Contains(page, "the disclosure did not verify") {
		t.Fatalf("tampered disclosure: %d\n%s", resp.StatusCode, page)
	}
	resp, page = upload(t, h, map[string][]byte{"disclosure": disc, "attestationBundle": []byte(res.AttestationBundle)})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "send it alone") {
		t.Fatalf("disclosure with a bundle: %d", resp.StatusCode)
	}
}

func TestReportPageLimits(t *testing.T) {
	h := realHarness(t, newRealEnclave(t), func(c *server.Config) { c.MaxProcessBody = 64 << 10 })
	resp, page := upload(t, h, map[string][]byte{"attestationBundle": bytes.Repeat([]byte("A"), attestation.MaxBundleTextSize+1)})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !pageError.MatchString(page) {
		t.Errorf("oversized bundle: %d", resp.StatusCode)
	}
	resp, _ = upload(t, h, map[string][]byte{"attestationBundle": []byte("x"), "output": bytes.Repeat([]byte(" "), 1<<20)})
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized output: %d", resp.StatusCode)
	}

	fake := newHarness(t, nil) // servertest.Verifier
	for _, method := range []string{"GET", "POST"} {
		resp, b := fake.do(method, "/verify", "", nil)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "not available") {
			t.Errorf("%s /verify without package verify's verifier: %d", method, resp.StatusCode)
		}
	}
}
