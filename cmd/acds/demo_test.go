package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/verify"
)

// TestDemo runs `acds demo` in-process: it must exit 0 and print a
// summary in which both bundles verified with the flags that apply, and it
// must remove its temporary directory.
func TestDemo(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // os.MkdirTemp honours it: the demo's data dir lands here
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := runDemo(ctx, env{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^fetched: patient pat-0002 \(.+\) from localhost via systemType demo, [1-9]\d* notarized TLS sessions$`),
		regexp.MustCompile(`(?m)^  resources: [1-9]\d* \(.*1 Patient.*1 Provenance.*\)$`),
		regexp.MustCompile(`(?m)^  bytes: [1-9]\d* at the portal, [1-9]\d* normalised output$`),
		regexp.MustCompile(`(?m)^  output digest: sha256:[0-9a-f]{64}$`),
		regexp.MustCompile(`(?m)^processed: the fetched record as fhir_r4_deidentified$`),
		regexp.MustCompile(`(?m)^  fetch-and-attest: valid=true enclaveHashMatch=true mpcTlsVerified=true teeQuoteVerified=true$`),
		regexp.MustCompile(`(?m)^  process: +valid=true enclaveHashMatch=true mpcTlsVerified=false teeQuoteVerified=true \(mpcTls does not apply`),
		regexp.MustCompile(`(?m)^  query: +valid=true enclaveHashMatch=true mpcTlsVerified=false teeQuoteVerified=true`),
		regexp.MustCompile(`(?m)^    "Patient.birthDate \| Observation.count\(\)" over record sha256:[0-9a-f]{64} gave \["\d{4}-\d\d-\d\d", [1-9]\d*\]$`),
		regexp.MustCompile(`(?m)^  disclosure: +valid=true enclaveHashMatch=true mpcTlsVerified=true teeQuoteVerified=true$`),
		regexp.MustCompile(`(?m)^    entry Observation/\S+ of the fetched record shown alone, under the signed root of its [1-9]\d* entries$`),
		regexp.MustCompile(`(?m)^  attested TLS: the enclave's evidence was verified in the handshake \(1 verification, \d+ connections from the cache, 0 refused\)$`),
		regexp.MustCompile(`(?m)^timings: startup \S+, fetch-and-attest \S+, process \S+, offline verification \S+, total \S+$`),
		regexp.MustCompile(`(?m)^result: everything verified$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("summary lacks %s\nstdout:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "output digest: sha256:"); n != 2 {
		t.Errorf("%d output digests, want 2", n)
	}
	// stderr is not a terminal here: plain progress lines, no escape codes.
	if strings.Contains(stderr.String(), "\033[") || !strings.Contains(stderr.String(), "• fetch-and-attest pat-0002: completed in ") {
		t.Errorf("progress on stderr:\n%q", stderr.String())
	}
	if strings.Contains(out+stderr.String(), demoportal.Password) {
		t.Error("the portal password is printed without --keep")
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "acds-demo-*"))
	if len(left) != 0 {
		t.Errorf("temporary data left behind: %v", left)
	}
}

// TestDemoKeep runs `acds demo --keep`: after the summary it prints the
// API URL and a token that work, keeps serving until interrupted, then
// exits 0 and leaves its data directory.
func TestDemoKeep(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	pr, pw := io.Pipe()
	var stderr lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- runDemo(ctx, env{args: []string{"--keep"}, stdout: pw, stderr: &stderr, getenv: func(string) string { return "" }})
		pw.Close()
	}()
	var api, token string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && (api == "" || token == "") {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "  API:           "); ok {
			api, _, _ = strings.Cut(v, " ")
		}
		if v, ok := strings.CutPrefix(line, "  bearer token:  "); ok {
			token = v
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if api == "" || token == "" {
		cancel()
		t.Fatalf("no API URL or token printed (exit %d); stderr:\n%s", <-done, stderr.String())
	}
	// The server is still up, and the printed token works over attested TLS
	// (here without the check: the test only needs to reach it).
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	c, err := client.New(api, &client.Options{HTTPClient: hc, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.Requests(ctx, "", 10)
	if err != nil || len(list.Items) != 3 { // fetch-and-attest, process, query
		t.Fatalf("requests after the demo = %+v, %v", list, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after interrupt; stderr:\n%s", code, stderr.String())
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "acds-demo-*", "data", "acds.db"))
	if len(left) != 1 {
		t.Errorf("--keep should keep the data directory: %v", left)
	}
}

func TestDemoUsage(t *testing.T) {
	var stderr lockedBuffer
	if code := runDemo(context.Background(), env{args: []string{"extra"}, stdout: io.Discard, stderr: &stderr}); code != 2 {
		t.Errorf("exit %d for an unexpected argument, want 2", code)
	}
	if code := runDemo(context.Background(), env{args: []string{"--nope"}, stdout: io.Discard, stderr: &stderr}); code != 2 {
		t.Errorf("exit %d for an unknown flag, want 2", code)
	}
}

// TestFetchAndAttestEndToEnd extends TestServeFetchAndAttest to every
// systemType and both outputFormats, over attested TLS: each completed
// request's output is a normalised FHIR R4 collection Bundle (it passes
// fhir.Check) ending in a Provenance that names the portal and the
// enclave's measurement, in the requested outputFormat (the request field
// picks it; there is no server default), and its bundle verifies offline
// with valid, enclaveHashMatch, mpcTlsVerified and teeQuoteVerified.
func TestFetchAndAttestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := startStack(ctx, stackOptions{Dir: t.TempDir(), Patients: 3, Seed: 11, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	policy, err := demoPolicy(s.NotaryKey)
	if err != nil {
		t.Fatal(err)
	}
	checker, err := attested.NewChecker(policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := checker.Client(s.BaseURL, &client.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	p := s.Portal.Patients()[0]
	family := strings.Fields(p.Name)[len(strings.Fields(p.Name))-1]
	measurement := hex.EncodeToString(s.Enclave.Measurement())
	v, err := verify.New(policy)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct{ system, format string }{
		{acds.SystemFHIRBasic, acds.OutputFHIRR4},
		{acds.SystemSMARTPassword, acds.OutputFHIRR4Deidentified},
		{acds.SystemSMARTForm, acds.OutputFHIRR4},
		{acds.SystemDemo, acds.OutputFHIRR4Deidentified},
	}
	ids := make([]string, len(cases))
	for i, tc := range cases {
		acc, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: tc.system, PortalURL: s.PortalURL, RecordID: p.ID,
			Username: demoportal.Username, Password: demoportal.Password, OutputFormat: tc.format})
		if err != nil {
			t.Fatalf("%s: %v", tc.system, err)
		}
		ids[i] = acc.RequestID
	}
	for i, tc := range cases {
		rec, err := c.Wait(ctx, ids[i])
		if err != nil || rec.Status != acds.StatusCompleted {
			t.Errorf("%s/%s: %+v %+v %v", tc.system, tc.format, rec, rec.Error, err)
			continue
		}
		out := rec.Result.Output
		if rec.Result.OutputFormat != tc.format {
			t.Errorf("%s: outputFormat %q, want %q", tc.system, rec.Result.OutputFormat, tc.format)
		}
		if err := fhir.Check(out, fhir.Options{}); err != nil {
			t.Errorf("%s/%s: the output is not valid FHIR R4: %v", tc.system, tc.format, err)
		}
		var b struct {
			ResourceType, Type string
			Entry              []struct{ Resource json.RawMessage }
		}
		if err := json.Unmarshal(out, &b); err != nil || b.ResourceType != "Bundle" || b.Type != "collection" || len(b.Entry) < 2 {
			t.Errorf("%s: output is not a collection Bundle: %v", tc.system, err)
			continue
		}
		prov := string(b.Entry[len(b.Entry)-1].Resource)
		for _, want := range []string{`"resourceType":"Provenance"`, `"system":"` + fhir.SourceSystem + `","value":"localhost"`,
			`"system":"` + fhir.MeasurementSystem + `","value":"` + measurement + `"`} {
			if !strings.Contains(prov, want) {
				t.Errorf("%s: the last entry lacks %s: %.400s", tc.system, want, prov)
			}
		}
		if got := strings.Contains(string(out), family); got != (tc.format == acds.OutputFHIRR4) {
			t.Errorf("%s/%s: patient family name %q in output = %v", tc.system, tc.format, family, got)
		}
		res, err := verifyResult(v, rec.Result)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Valid || !res.EnclaveHashMatch || !res.MPCTLSVerified || !res.TEEQuoteVerified || !res.OutputChecked {
			t.Errorf("%s/%s: offline verification %s: %v", tc.system, tc.format, flagsLine(res), res.Reasons())
		}
		if res.Claims == nil || res.Claims.OutputFormat != tc.format || len(res.Claims.Source.Sessions) == 0 ||
			res.Claims.Source.Sessions[0].Host != "localhost" {
			t.Errorf("%s: claims %+v", tc.system, res.Claims)
		}
		// The same bundle with another output must not verify.
		tampered := *rec.Result
		tampered.Output = append(json.RawMessage{}, out...)
		tampered.Output[len(tampered.Output)-2] = ' '
		if res, err := verifyResult(v, &tampered); err == nil && res.Valid {
			t.Errorf("%s: a changed output verified", tc.system)
		}
	}
}

// TestDemoNotVerified: when the offline policy does not accept the bundles
// (here: another notary key, so MPC-TLS does not verify), the demo says
// NOT VERIFIED, names what failed and exits 1.
func TestDemoNotVerified(t *testing.T) {
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	otherNotary := make(ed25519.PublicKey, ed25519.PublicKeySize)
	code, err := demo(ctx, env{stdout: &stdout, stderr: &stderr}, t.TempDir(), demoOptions{
		offlinePolicy: func(p *verify.Policy) { p.NotaryKeys = []ed25519.PublicKey{otherNotary} }})
	if code != 1 || err == nil || !strings.Contains(err.Error(), "the fetch-and-attest bundle did not verify") ||
		strings.Contains(err.Error(), "the process bundle") {
		t.Fatalf("code %d, err %v", code, err)
	}
	out := stdout.String()
	if !strings.Contains(out, "fetch-and-attest: valid=false") || !strings.Contains(out, "mpcTlsVerified=false") ||
		!strings.Contains(out, "result: NOT VERIFIED") || strings.Contains(out, "everything verified") {
		t.Errorf("summary:\n%s", out)
	}
}

// TestDemoCancelled: an interrupted demo stops with a non-zero exit and a
// message, and leaves no data behind.
func TestDemoCancelled(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr lockedBuffer
	if code := runDemo(ctx, env{stdout: io.Discard, stderr: &stderr}); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "acds demo: FAILED: ") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "acds-demo-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestProgressTerminal: on a terminal the waiting status is one line
// rewritten in place and cleared by the next step; elsewhere it is a plain
// line at most every two seconds.
func TestProgressTerminal(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b, tty: true}
	p.status("fetch: processing 0.1s")
	p.status("fetch: processing 0.2s")
	p.step("fetch: completed")
	want := "\r\033[K  fetch: processing 0.1s\r\033[K  fetch: processing 0.2s\r\033[K• fetch: completed\n"
	if b.String() != want {
		t.Errorf("tty progress = %q, want %q", b.String(), want)
	}
	b.Reset()
	p = &progress{w: &b}
	p.step("start")
	p.status("fetch: processing 0.1s") // within two seconds of the step: not shown
	p.last = time.Now().Add(-3 * time.Second)
	p.status("fetch: processing 3.1s")
	if want := "• start\n  fetch: processing 3.1s\n"; b.String() != want {
		t.Errorf("plain progress = %q, want %q", b.String(), want)
	}
}
