package report_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/verify"
	"github.com/acds-project/acds/verify/report"
)

type fixture struct {
	dir     string
	enclave *attestation.Enclave
	now     time.Time
	notary  ed25519.PrivateKey
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

var measurement = func() []byte { s := sha512.Sum384([]byte("acds report test build")); return s[:] }()

func TestMain(m *testing.M) {
	code := m.Run()
	if fix != nil {
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}

func getFixture(t testing.TB) *fixture {
	t.Helper()
	fixOnce.Do(func() {
		f := &fixture{now: time.Now().UTC().Truncate(time.Second)}
		if f.dir, fixErr = os.MkdirTemp("", "acds-report-test-"); fixErr != nil {
			return
		}
		backend, err := sim.NewBackend(f.dir, sim.Options{Measurement: measurement, RSABits: 2048})
		if fixErr = err; err != nil {
			return
		}
		if f.enclave, fixErr = attestation.New(context.Background(), backend, attestation.Options{Now: func() time.Time { return f.now }}); fixErr != nil {
			return
		}
		seed := sha256.Sum256([]byte("report test notary"))
		f.notary = ed25519.NewKeyFromSeed(seed[:])
		fix = f
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

func (f *fixture) policy(allowSim bool) verify.Policy {
	return verify.Policy{
		UnsafeAllowSimulation:          allowSim,
		UnsafeTrustBundleSimulatedRoot: allowSim,
		Measurements:                   map[string][][]byte{attestation.ProfileSEVSNPSim: {measurement}},
		NotaryKeys:                     []ed25519.PublicKey{f.notary.Public().(ed25519.PublicKey)},
		Now:                            func() time.Time { return f.now.Add(time.Minute) },
	}
}

// output is a real fhir_r4 output: a Patient and two glucose
// observations, the later one 6.1 mmol/L, with display text given.
func (f *fixture) output(t *testing.T, display string) []byte {
	t.Helper()
	in := `{"resourceType":"Bundle","type":"collection","entry":[
 {"fullUrl":"urn:uuid:4b1c6a36-2f3c-4f59-9a3e-6c1d3f1a0001","resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Doe"}]}},
 {"fullUrl":"urn:uuid:4b1c6a36-2f3c-4f59-9a3e-6c1d3f1a0002","resource":{"resourceType":"Observation","id":"o1","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"15074-8","display":` + jsonString(display) + `}]},"subject":{"reference":"Patient/p1"},"effectiveDateTime":"2024-01-01","valueQuantity":{"value":5.2,"unit":"mmol/L"}}},
 {"fullUrl":"urn:uuid:4b1c6a36-2f3c-4f59-9a3e-6c1d3f1a0003","resource":{"resourceType":"Observation","id":"o2","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"15074-8","display":` + jsonString(display) + `}]},"subject":{"reference":"Patient/p1"},"effectiveDateTime":"2024-03-01","valueQuantity":{"value":6.1,"unit":"mmol/L"}}}]}`
	out, err := fhir.Process([]byte(in), fhir.Options{Format: "fhir_r4", Source: "raw", Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	return out.JSON
}

// hostileOutput is the output with its observation display replaced by s:
// FHIR validation refuses markup in strings, but a report renders any
// output it is given, attested or not.
func (f *fixture) hostileOutput(t *testing.T, s string) []byte {
	t.Helper()
	out := f.output(t, "Glucose")
	enc, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(out, []byte(`"Glucose"`), enc)
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

func (f *fixture) statement(t *testing.T, sni string) []byte {
	t.Helper()
	s := &mpctls.Statement{
		SessionID: [16]byte{1}, Start: f.now.Add(-3 * time.Second), End: f.now.Add(-2 * time.Second),
		SNI: sni, Address: "127.0.0.1:443", Version: mpctls.VersionTLS13, CipherSuite: 0x1301,
		CertChainDigest: sha256.Sum256([]byte("chain")), Root: sha256.Sum256([]byte("root")),
		CertSubject:   "CN=" + sni + ",O=Example Health <Portal>",
		ClientRecords: 3, ClientBytes: 600, ServerRecords: 9, ServerBytes: 40000,
	}
	b, err := s.Sign(f.notary)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) bundle(t *testing.T, requestID, host, requestLine string, output []byte) []byte {
	t.Helper()
	return f.bundleCovered(t, requestID, host, requestLine, output, nil)
}

// bundleCovered is bundle with the coverage cov in the claims of an
// mpc-tls source.
func (f *fixture) bundleCovered(t *testing.T, requestID, host, requestLine string, output []byte, cov *acds.Coverage) []byte {
	t.Helper()
	c := attestation.Claims{RequestID: requestID, OutputFormat: "fhir_r4", OutputDigest: attestation.Digest(output), Coverage: cov}
	var stmts [][]byte
	if host == "" {
		c.Source = attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("input"))}
	} else {
		sni := host
		if strings.ContainsAny(sni, `<>"`) {
			sni = "portal.example.org" // a notary only signs a valid server name
		}
		stmts = [][]byte{f.statement(t, sni)}
		c.Source = attestation.Source{Kind: acds.SourceMPCTLS, Sessions: []attestation.Session{{Host: host, RequestLine: requestLine}}}
	}
	b, err := f.enclave.Attest(context.Background(), c, stmts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func render(t *testing.T, p verify.Policy, in report.Input) (string, *verify.Result) {
	t.Helper()
	v, err := verify.New(p)
	if err != nil {
		t.Fatal(err)
	}
	var res *verify.Result
	if in.Output != nil {
		res, err = v.VerifyOutput(in.Bundle, in.Output)
	} else {
		res, err = v.Verify(in.Bundle)
	}
	if err != nil {
		t.Fatal(err)
	}
	in.Result, in.Verifier = res, v
	page, err := report.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	checkDocument(t, page)
	return string(page), res
}

var verdictRE = regexp.MustCompile(`id="verdict" data-valid="(true|false)">(VALID|INVALID)<`)

func verdict(t *testing.T, page string) string {
	t.Helper()
	m := verdictRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no verdict in the page")
	}
	return m[2]
}

func checkRow(t *testing.T, page, check string) string {
	t.Helper()
	re := regexp.MustCompile(`<tr data-check="` + regexp.QuoteMeta(check) + `"><td><code>[^<]*</code></td><td class="[a-z]+">([^<]*)</td>`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no row for check %s", check)
	}
	return m[1]
}

func TestValidRawWithOutput(t *testing.T) {
	f := getFixture(t)
	out := f.output(t, "Glucose")
	page, res := render(t, f.policy(true), report.Input{Bundle: f.bundle(t, "req-1", "", "", out), Output: out})
	if !res.Valid || verdict(t, page) != "VALID" {
		t.Fatalf("valid bundle: result %v, page %s", res.Valid, verdict(t, page))
	}
	for check, want := range map[string]string{"signature": "pass", "evidence": "pass", "measurement": "pass", "mpc-tls": "does not apply", "output": "pass", "manifest": "does not apply"} {
		if got := checkRow(t, page, check); got != want {
			t.Errorf("check %s: %q, want %q", check, got, want)
		}
	}
	for _, want := range []string{"relaxation: ", "Glucose", "6.1 mmol/L", "2024-03-01", "<th>Observation</th><td>2</td>", "root (ARK)", "chip key (VCEK)", hexOf(measurement)} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "5.2 mmol/L") {
		t.Error("an earlier observation is shown as the latest")
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(digits[c>>4])
		s.WriteByte(digits[c&15])
	}
	return s.String()
}

func TestMPCTLSNotary(t *testing.T) {
	f := getFixture(t)
	out := []byte(`{"resourceType":"Bundle"}`)
	page, res := render(t, f.policy(true), report.Input{Bundle: f.bundle(t, "req-2", "portal.example.org", "GET /fhir/Patient/7 HTTP/1.1", out)})
	if !res.Valid || verdict(t, page) != "VALID" {
		t.Fatalf("mpc-tls bundle: %v", res.Reasons())
	}
	for _, want := range []string{"portal.example.org", "TLS 1.3", "TLS_AES_128_GCM_SHA256", "127.0.0.1:443", "GET /fhir/Patient/7 HTTP/1.1",
		"CN=portal.example.org,O=Example Health &lt;Portal&gt;", "the certificate itself is not carried"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if got := checkRow(t, page, "mpc-tls"); got != "pass" {
		t.Errorf("mpc-tls check: %q", got)
	}
}

// TestCoverageShown: the page shows a fetched record's signed coverage —
// every request with its status, pages and entries, and the types the
// portal does not search — and says when a bundle records none.
func TestCoverageShown(t *testing.T) {
	f := getFixture(t)
	out := []byte(`{"resourceType":"Bundle"}`)
	cov := &acds.Coverage{CapabilityStatement: true, Requests: []acds.CoverageRequest{
		{RequestLine: "GET /fhir/metadata HTTP/1.1", Status: 200, Pages: 1},
		{RequestLine: "GET /fhir/Observation?subject=Patient/7 HTTP/1.1", Status: 200, Pages: 3, Entries: 212},
	}, Unsupported: []string{"Claim", "Coverage"}}
	page, res := render(t, f.policy(true), report.Input{Bundle: f.bundleCovered(t, "req-c", "portal.example.org", "GET /fhir/metadata HTTP/1.1", out, cov)})
	if !res.Valid {
		t.Fatalf("covered bundle: %v", res.Reasons())
	}
	for _, want := range []string{`<h2>Coverage</h2>`, "searches of the Patient compartment, as the portal&#39;s CapabilityStatement advertised: 2 requests, 212 entries",
		`<tr><td class="h">GET /fhir/Observation?subject=Patient/7 HTTP/1.1</td><td>200</td><td>3</td><td>212</td></tr>`, "does not search: Claim, Coverage."} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	page, _ = render(t, f.policy(true), report.Input{Bundle: f.bundle(t, "req-n", "portal.example.org", "GET /fhir/Patient/7 HTTP/1.1", out)})
	if !strings.Contains(page, "assembled from: no coverage recorded.") {
		t.Error("a bundle without coverage does not say so")
	}
	page, _ = render(t, f.policy(true), report.Input{Bundle: f.bundle(t, "req-r", "", "", out)})
	if strings.Contains(page, "<h2>Coverage</h2>") {
		t.Error("a raw submission shows a coverage")
	}
}

func TestTampered(t *testing.T) {
	f := getFixture(t)
	out := f.output(t, "Glucose")
	b := f.bundle(t, "req-3", "", "", out)
	// Another output than the attested one, and a changed claims byte.
	other := f.output(t, "Glucose, tampered")
	page, res := render(t, f.policy(true), report.Input{Bundle: b, Output: other})
	if res.Valid || verdict(t, page) != "INVALID" || checkRow(t, page, "output") != "fail" {
		t.Fatalf("other output: valid %v, output check %q", res.Valid, checkRow(t, page, "output"))
	}
	if !strings.Contains(page, "NO: this output is not the attested one") {
		t.Error("the page does not say the output is not the attested one")
	}
	parsed, err := attestation.ParseBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Statement = bytes.Clone(parsed.Statement)
	parsed.Statement[len(parsed.Statement)-70] ^= 1 // inside the payload or signature
	tampered, err := parsed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	page, res = render(t, f.policy(true), report.Input{Bundle: tampered})
	if res.Valid || verdict(t, page) != "INVALID" || checkRow(t, page, "signature") != "fail" {
		t.Fatalf("tampered claims: valid %v, signature check %q", res.Valid, checkRow(t, page, "signature"))
	}
	if !strings.Contains(page, "nothing they say is shown") {
		t.Error("claims that did not verify are not marked as such")
	}
}

func TestSimulatedRefused(t *testing.T) {
	f := getFixture(t)
	p := f.policy(false)
	page, res := render(t, p, report.Input{Bundle: f.bundle(t, "req-4", "", "", []byte("x"))})
	if res.Valid || verdict(t, page) != "INVALID" {
		t.Fatal("a simulated bundle is valid without simulation allowed")
	}
	if got := checkRow(t, page, "profile"); got != "fail" {
		t.Errorf("profile check %q, want fail", got)
	}
	if got := checkRow(t, page, "measurement"); got == "pass" {
		t.Error("measurement shown as passed although the evidence was refused")
	}
	if !strings.Contains(page, html.EscapeString(verify.ErrSimulation.Error())) {
		t.Error("the reason is not shown")
	}
}

const hostile = `"><script>alert(1)</script><img src=x onerror=alert(2)><a href="javascript:alert(3)">`

func TestHostileStringsEscaped(t *testing.T) {
	f := getFixture(t)
	out := f.hostileOutput(t, hostile)
	// Every string the page shows that comes from the bundle, the output
	// or the caller: requestId, portal host, request line, observation
	// display, notes and the error.
	b := f.bundle(t, "req"+hostile, "h"+hostile, "GET /"+hostile+" HTTP/1.1", out)
	v, err := verify.New(f.policy(true))
	if err != nil {
		t.Fatal(err)
	}
	res, err := v.VerifyOutput(b, out)
	if err != nil {
		t.Fatal(err)
	}
	page, err := report.Render(report.Input{Result: res, Bundle: b, Output: out, Verifier: v, Notes: []string{"note" + hostile}, Error: "err" + hostile, Upload: "/verify"})
	if err != nil {
		t.Fatal(err)
	}
	checkDocument(t, page)
	s := string(page)
	// As text, "onerror=" and "javascript:" are harmless; checkDocument
	// checks that no element or attribute came out of them.
	for _, bad := range []string{"<script", "<img", "<a href"} {
		if strings.Contains(strings.ToLower(s), bad) {
			t.Errorf("the page contains %q unescaped", bad)
		}
	}
	for _, want := range []string{"req&#34;&gt;&lt;script&gt;", "note&#34;&gt;&lt;script&gt;", "err&#34;&gt;&lt;script&gt;", "GET /&#34;&gt;&lt;script&gt;"} {
		if !strings.Contains(s, want) {
			t.Errorf("the page lacks the escaped %q", want)
		}
	}
	if n := strings.Count(s, "&lt;script&gt;alert(1)"); n < 5 {
		t.Errorf("the hostile string appears escaped %d times, want every field (≥ 5)", n)
	}
}

func TestUploadPageAndNoResult(t *testing.T) {
	if _, err := report.Render(report.Input{}); !errors.Is(err, report.ErrNoResult) {
		t.Fatalf("empty input: %v", err)
	}
	page, err := report.Render(report.Input{Upload: "/verify"})
	if err != nil {
		t.Fatal(err)
	}
	checkDocument(t, page)
	s := string(page)
	if !strings.Contains(s, `<form method="post" action="/verify" enctype="multipart/form-data"`) || strings.Contains(s, `id="verdict"`) {
		t.Errorf("upload page: %s", s)
	}
}

// checkDocument checks what every report must be: the CSP in a meta
// element allows exactly the inline stylesheet by its hash and no script,
// and nothing in the document refers outside it.
func checkDocument(t *testing.T, page []byte) {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(page))
	var csp, styleText string
	inStyle := false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			if tok.Data == "script" || tok.Data == "img" || tok.Data == "link" || tok.Data == "iframe" || tok.Data == "object" {
				t.Errorf("element <%s> in the report", tok.Data)
			}
			inStyle = tok.Data == "style"
			for _, a := range tok.Attr {
				if tok.Data == "meta" && a.Key == "http-equiv" && a.Val == "Content-Security-Policy" {
					for _, b := range tok.Attr {
						if b.Key == "content" {
							csp = b.Val
						}
					}
				}
				if strings.HasPrefix(a.Key, "on") {
					t.Errorf("event handler attribute %s", a.Key)
				}
				switch a.Key {
				case "href", "src", "action", "formaction", "srcset", "poster", "background":
					if !strings.HasPrefix(a.Val, "/") || strings.HasPrefix(a.Val, "//") {
						t.Errorf("%s=%q refers outside the document's origin", a.Key, a.Val)
					}
				}
				if a.Key == "style" {
					t.Errorf("inline style attribute %q (not allowed by the CSP)", a.Val)
				}
			}
		case html.TextToken:
			if inStyle {
				styleText += tok.Data
			}
		case html.EndTagToken:
			inStyle = false
		}
	}
	if csp != report.CSP(false) {
		t.Fatalf("meta CSP %q, want %q", csp, report.CSP(false))
	}
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP not strict: %q", csp)
	}
	h := sha256.Sum256([]byte(styleText))
	if want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"; !strings.Contains(csp, want) {
		t.Errorf("the CSP does not allow the page's stylesheet: %q lacks %q", csp, want)
	}
	if strings.Contains(string(page), "url(") || strings.Contains(string(page), "@import") {
		t.Error("the stylesheet loads something")
	}
}

func TestCSPHeader(t *testing.T) {
	if h := report.CSP(true); !strings.HasSuffix(h, "; frame-ancestors 'none'") || !strings.HasPrefix(h, report.CSP(false)) {
		t.Errorf("header CSP %q", h)
	}
}
