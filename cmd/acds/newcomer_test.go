package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/client"
)

// TestVerifyPolicyErrorsTellTheTruth: `acds verify --policy FILE` says what
// FILE is not (issue 11, item 6): junk is "not a manifest" (it used to be
// called "a signed manifest" needing --manifest-key), a broken JSON
// description is not a valid description, and a signed manifest with the
// wrong key fails its signature. All exit 2.
func TestVerifyPolicyErrorsTellTheTruth(t *testing.T) {
	dir := t.TempDir()
	bundleFile := filepath.Join(dir, "bundle.cbor")
	os.WriteFile(bundleFile, attBundle(t, filepath.Join(dir, "data")), 0o644)
	junk := filepath.Join(dir, "junk.txt")
	os.WriteFile(junk, []byte("hello, I am not a manifest\n"), 0o644)
	badJSON := filepath.Join(dir, "bad.json")
	os.WriteFile(badJSON, []byte(`{"issuer": 7}`), 0o644)

	desc := manifest.Description{Issuer: "t", NotBefore: time.Now().Add(-time.Hour).UTC(), NotAfter: time.Now().Add(time.Hour).UTC(),
		Profiles: map[string]manifest.ProfileDescription{"sev-snp-sim": {Measurements: []string{strings.Repeat("ab", 48)}}}}
	descJSON, _ := json.Marshal(desc)
	descFile := filepath.Join(dir, "m.json")
	os.WriteFile(descFile, descJSON, 0o644)
	signed := filepath.Join(dir, "m.cose")
	if code, _, errOut := attRun(t, "", "manifest", "sign", "--key", filepath.Join(dir, "k"), "--in", descFile, "--out", signed); code != 0 {
		t.Fatalf("sign: %d %s", code, errOut)
	}
	other, _, _ := ed25519.GenerateKey(nil)
	otherFile := filepath.Join(dir, "other.pub")
	os.WriteFile(otherFile, []byte(hex.EncodeToString(other)), 0o644)

	for _, c := range []struct {
		args        []string
		want, avoid string
	}{
		{[]string{"--policy", junk}, "is not a manifest", "is a signed manifest"},
		{[]string{"--policy", junk, "--manifest-key", otherFile}, "is not a manifest", "signature"},
		{[]string{"--policy", badJSON}, "not a valid JSON manifest description", "is a signed manifest"},
		{[]string{"--policy", signed}, "is a signed manifest: give the publisher's public key", ""},
		{[]string{"--policy", signed, "--manifest-key", otherFile}, "signature does not verify with the key in " + otherFile, ""},
	} {
		code, out, errOut := attRun(t, "", append([]string{"verify", bundleFile, "--allow-simulated"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) || (c.avoid != "" && strings.Contains(errOut, c.avoid)) {
			t.Errorf("%v: exit %d, stderr %q (want it to say %q, not %q)%s", c.args, code, errOut, c.want, c.avoid, out)
		}
	}
}

// helpText runs `acds args… -h` and returns what it prints.
func helpText(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := attRun(t, "", append(args, "-h")...)
	if code != 0 {
		t.Fatalf("acds %s -h: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	return out + errOut
}

// flagUsages splits flag.PrintDefaults output into each flag's usage text.
func flagUsages(help string) map[string]string {
	u := map[string]string{}
	var name string
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			name = strings.TrimPrefix(strings.Fields(line)[0], "-")
			if i := strings.IndexByte(line, '\t'); i >= 0 {
				u[name] = line[i+1:]
			} else {
				u[name] = ""
			}
		case strings.HasPrefix(line, "    \t") && name != "":
			u[name] += " " + strings.TrimSpace(line)
		default:
			name = ""
		}
	}
	return u
}

// TestHelpDescribesTheCommand: every long-running command's -h says what
// it does before its flags (notary and portal printed only the flags), and
// verify's -h documents its exit codes and, for every flag, its default
// (the zero defaults flag.PrintDefaults leaves out).
func TestHelpDescribesTheCommand(t *testing.T) {
	for _, c := range []struct{ cmd, says string }{
		{"notary", "recording notary"},
		{"portal", "demo clinical portal"},
		{"serve", "Serves the ACDS v1 API"},
		{"verify", "Verifies an attestation bundle"},
	} {
		help := helpText(t, c.cmd)
		flags := strings.Index(help, "\n  -")
		if flags < 0 || !strings.Contains(help[:flags], c.says) || !strings.Contains(help[:flags], "usage: acds "+c.cmd) {
			t.Errorf("acds %s -h has no description (want %q before the flags):\n%s", c.cmd, c.says, help)
		}
	}
	help := helpText(t, "verify")
	for _, want := range []string{"0 valid", "1 invalid", "2 usage error", "unreadable input", "acds measure"} {
		if !strings.Contains(help, want) {
			t.Errorf("acds verify -h does not say %q:\n%s", want, help)
		}
	}
	for name, usage := range flagUsages(help) {
		if !strings.Contains(usage, "default") {
			t.Errorf("acds verify -h: --%s documents no default: %q", name, usage)
		}
	}
}

// TestManifestSignPubOut: --pub-out writes the publisher key in the form
// manifest verify --key and verify --manifest-key read (it was printed on
// standard error only, mixed with the other messages).
func TestManifestSignPubOut(t *testing.T) {
	dir := t.TempDir()
	bundleFile := filepath.Join(dir, "bundle.cbor")
	os.WriteFile(bundleFile, attBundle(t, filepath.Join(dir, "data")), 0o644)
	self := selfHex(t)
	desc := manifest.Description{Issuer: "t", NotBefore: time.Now().Add(-time.Hour).UTC(), NotAfter: time.Now().Add(time.Hour).UTC(),
		Profiles: map[string]manifest.ProfileDescription{"sev-snp-sim": {Measurements: []string{self}}}}
	descJSON, _ := json.Marshal(desc)
	descFile := filepath.Join(dir, "m.json")
	os.WriteFile(descFile, descJSON, 0o644)
	signed, pub := filepath.Join(dir, "m.cose"), filepath.Join(dir, "publisher.pub")
	if code, _, errOut := attRun(t, "", "manifest", "sign", "--key", filepath.Join(dir, "k"), "--in", descFile, "--out", signed, "--pub-out", pub); code != 0 {
		t.Fatalf("sign --pub-out: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := attRun(t, "", "manifest", "verify", "--key", pub, "--in", signed); code != 0 || !strings.Contains(out, self) {
		t.Fatalf("manifest verify --key <pub-out>: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := attRun(t, "", "verify", "--policy", signed, "--manifest-key", pub, "--allow-simulated", bundleFile); code != 0 {
		t.Fatalf("verify --manifest-key <pub-out>: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := attRun(t, "", "manifest", "sign", "--key", filepath.Join(dir, "k"), "--in", descFile, "--out", signed, "--pub-out", filepath.Join(dir, "no", "such", "dir")); code == 0 {
		t.Fatalf("--pub-out into a missing directory: exit 0")
	}
}

func selfHex(t *testing.T) string {
	t.Helper()
	code, out, errOut := attRun(t, "", "measure")
	if code != 0 {
		t.Fatalf("measure: %d %s", code, errOut)
	}
	return strings.TrimSpace(out)
}

// TestServeReadyLineNamesTheMeasurement: the ready line keeps its start
// (scripts parse "acds X.Y.Z serving on URL") and then names the enclave
// and the code hash a verifier must expect — for sev-snp-sim the hash of
// this very executable, which `acds measure` prints and /v1/attestation
// reports.
func TestServeReadyLineNamesTheMeasurement(t *testing.T) {
	ready, _, stop := startServeReady(t, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	defer stop()
	if ready[2] != "sev-snp-sim" || ready[3] != ", simulated" {
		t.Errorf("ready line enclave %q%q, want sev-snp-sim, simulated", ready[2], ready[3])
	}
	if self := selfHex(t); ready[4] != self {
		t.Errorf("ready line measurement %s, acds measure %s", ready[4], self)
	}
	c, err := client.New(ready[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Attestation(context.Background())
	if err != nil || a.Measurement != ready[4] {
		t.Fatalf("/v1/attestation measurement %q (%v), ready line %s", a.Measurement, err, ready[4])
	}
}

// TestServeBusyPortFailsFast: a taken --addr is refused before the store,
// the enclave and the notary are opened (nothing is created in the data
// directory), with one line naming the address (it used to start them,
// then print the error twice: a JSON log line and a plain one).
func TestServeBusyPortFailsFast(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	dir := filepath.Join(t.TempDir(), "data")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := runServe(context.Background(), env{args: []string{"--addr", addr, "--data-dir", dir}, stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	if code == 0 {
		t.Fatalf("exit 0 on a busy address")
	}
	errText := stderr.String()
	if lines := strings.Split(strings.TrimSpace(errText), "\n"); len(lines) != 1 ||
		!strings.Contains(lines[0], "cannot listen on "+addr) || !strings.Contains(lines[0], "already in use") {
		t.Errorf("stderr should be one line naming %s:\n%s", addr, errText)
	}
	if strings.Count(errText, addr) != 1 {
		t.Errorf("the address is named %d times:\n%s", strings.Count(errText, addr), errText)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: %q", stdout.String())
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		t.Errorf("the service was opened before the address was bound: %s holds %d entries", dir, len(entries))
	}
	t.Logf("failed in %v", time.Since(start))
}

// TestServeSecondOnSameDataDirRefused: a second `acds serve` on a data
// directory in use refuses to start, naming the directory (it used to
// start silently and share the SQLite file and the enclave's keys).
func TestServeSecondOnSameDataDirRefused(t *testing.T) {
	dir := t.TempDir()
	_, _, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	defer stop()
	var stdout lockedBuffer
	var stderr bytes.Buffer
	// A second server that did start is stopped after a while, and fails
	// the test by its ready line.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := runServe(ctx, env{args: []string{"--addr", "127.0.0.1:0", "--data-dir", dir}, stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	abs, _ := filepath.Abs(dir)
	if code == 0 || stdout.String() != "" || !strings.Contains(stderr.String(), "data directory "+abs+" is in use") {
		t.Fatalf("second serve: exit %d\nstdout %q\nstderr %q", code, stdout.String(), stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 {
		t.Errorf("want one error line, got:\n%s", stderr.String())
	}
}

// otherBuildBundle is a raw-source bundle from a simulated enclave whose
// code hash is not this binary's: a server built another way (go run
// against go build, or -ldflags=-s -w). It returns the bundle file and
// that hash.
func otherBuildBundle(t *testing.T, dir string) (string, string) {
	t.Helper()
	other := bytes.Repeat([]byte{0x5a}, 48)
	b, err := sim.NewBackend(filepath.Join(dir, "other"), sim.Options{RSABits: 2048, Measurement: other})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := e.Attest(context.Background(), attestation.Claims{
		RequestID: "req-other", OutputFormat: "fhir_r4", OutputDigest: attestation.Digest([]byte("out")),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("in"))},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "other.cbor")
	os.WriteFile(f, bundle, 0o644)
	return f, hex.EncodeToString(other)
}

// TestVerifyNamesTheExpectedHash: a bundle from another build fails with a
// reason naming the hash that was expected (this binary's), in the text
// report and in details.reasons, with a hint at --measurement; it used to
// say only that the enclave's hash was not published.
func TestVerifyNamesTheExpectedHash(t *testing.T) {
	dir := t.TempDir()
	file, other := otherBuildBundle(t, dir)
	self := selfHex(t)
	code, out, _ := attRun(t, "", "verify", "--allow-simulated", file)
	if code != 1 || !strings.Contains(out, "expected "+self) || !strings.Contains(out, other) || !strings.Contains(out, "--measurement") {
		t.Fatalf("exit %d, want 1 and the expected hash %s named:\n%s", code, self, out)
	}
	code, out, _ = attRun(t, "", "verify", "--allow-simulated", "--json", file)
	var resp struct {
		EnclaveHashMatch bool `json:"enclaveHashMatch"`
		Details          struct {
			Reasons []string `json:"reasons"`
		} `json:"details"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || code != 1 || resp.EnclaveHashMatch {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	named := false
	for _, r := range resp.Details.Reasons {
		named = named || strings.Contains(r, "expected "+self)
	}
	if !named {
		t.Errorf("details.reasons do not name the expected hash %s: %q", self, resp.Details.Reasons)
	}
}

// TestVerifyMeasurementFlag: --measurement HEX is a policy without a
// manifest (DESIGN §8): repeatable, combinable with --allow-simulated,
// checked for hex and length, exclusive with --policy.
func TestVerifyMeasurementFlag(t *testing.T) {
	dir := t.TempDir()
	file, other := otherBuildBundle(t, dir)
	self := selfHex(t)
	if code, out, errOut := attRun(t, "", "verify", file, "--allow-simulated", "--measurement", other); code != 0 || !strings.HasPrefix(out, "VALID") {
		t.Fatalf("--measurement <its hash>: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := attRun(t, "", "verify", file, "--allow-simulated", "--measurement", self, "--measurement", other); code != 0 {
		t.Fatalf("repeated --measurement: exit %d\n%s", code, out)
	}
	if code, out, _ := attRun(t, "", "verify", file, "--allow-simulated", "--measurement", self); code != 1 || !strings.Contains(out, "expected "+self) {
		t.Fatalf("--measurement <another hash>: exit %d\n%s", code, out)
	}
	if code, _, _ := attRun(t, "", "verify", file, "--measurement", other); code != 1 {
		t.Fatalf("--measurement without --allow-simulated on a simulated bundle: exit %d, want 1", code)
	}
	desc := filepath.Join(dir, "m.json")
	os.WriteFile(desc, []byte(`{}`), 0o644)
	key := filepath.Join(dir, "k.pub")
	os.WriteFile(key, []byte(strings.Repeat("00", 32)), 0o644)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--measurement", "xyz"}, "not hex"},
		{[]string{"--measurement", other[:94]}, "94 hex digits"},
		{[]string{"--measurement", other, "--policy", desc}, "exclusive"},
		{[]string{"--measurement", other, "--manifest-key", key}, "--manifest-key needs --policy"},
	} {
		code, _, errOut := attRun(t, "", append([]string{"verify", file, "--allow-simulated"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.says)
		}
	}
}

// TestPrettyOutputVerifies: a pretty-printed copy of a real output
// (json.MarshalIndent, which also escapes < and &) verifies through POST
// /v1/verify and `acds verify --output` alike — one rule, acds.OutputBytes.
// acds verify used to refuse it, and the server (compacting only) refused
// it whenever the output held a character MarshalIndent escapes.
func TestPrettyOutputVerifies(t *testing.T) {
	dir := t.TempDir()
	base, _, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"))
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	in := []byte(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":` +
		`{"resourceType":"Patient","id":"p1","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">José &amp; Zoë</div>"},` +
		`"name":[{"family":"Núñez","given":["José"]}],"gender":"male","birthDate":"1974-12-25"}}]}`)
	acc, err := c.Process(ctx, acds.ProcessRequest{Data: in, OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("%+v %v", rec, err)
	}
	pretty, err := json.MarshalIndent(rec.Result.Output, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(pretty, []byte(`\u003cdiv`)) || !bytes.Contains(pretty, []byte("\n  ")) {
		t.Fatalf("the copy is not pretty-printed and re-escaped:\n%s", pretty)
	}

	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: pretty})
	if err != nil || !v.Valid {
		t.Errorf("POST /v1/verify of the pretty copy: %+v %v", v, err)
	}

	bundleFile, prettyFile := filepath.Join(dir, "bundle.b64"), filepath.Join(dir, "output.pretty.json")
	os.WriteFile(bundleFile, []byte(rec.Result.AttestationBundle), 0o644)
	os.WriteFile(prettyFile, pretty, 0o644)
	if code, out, errOut := attRun(t, "", "verify", bundleFile, "--allow-simulated", "--output", prettyFile); code != 0 || !strings.Contains(out, "outputChecked") {
		t.Errorf("acds verify --output <pretty copy>: exit %d\n%s%s", code, out, errOut)
	}
	// A changed copy still fails, in both.
	changed := bytes.Replace(pretty, []byte("Núñez"), []byte("Nunez"), 1)
	os.WriteFile(prettyFile, changed, 0o644)
	if code, out, _ := attRun(t, "", "verify", bundleFile, "--allow-simulated", "--output", prettyFile); code != 1 {
		t.Errorf("acds verify --output <changed copy>: exit %d\n%s", code, out)
	}
	if v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: changed}); err != nil || v.Valid {
		t.Errorf("POST /v1/verify of a changed copy: %+v %v", v, err)
	}
}
