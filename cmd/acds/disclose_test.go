package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
	"github.com/acds-project/acds/attestation/sim"
)

// discloseFixture writes an output of three entries (Patient, Observation,
// Provenance), its disclosure key and a bundle committing to it from a
// simulated enclave measuring the test binary, and returns their paths.
func discloseFixture(t *testing.T) (dir, bundleFile, outputFile, keyFile string) {
	t.Helper()
	dir = t.TempDir()
	output, err := os.ReadFile("../../verify/testdata/v1-output.json")
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{5}, disclosure.KeySize)
	c, err := disclosure.Commit(key, output)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.NewBackend(filepath.Join(dir, "sim"), sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := e.Attest(context.Background(), attestation.Claims{
		RequestID: "req-disclose", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest(output),
		Source:  attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("in"))},
		Entries: &attestation.EntryCommitment{Root: c.Root[:], Count: c.Count},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bundleFile, outputFile, keyFile = filepath.Join(dir, "bundle.b64"), filepath.Join(dir, "output.json"), filepath.Join(dir, "key")
	for name, data := range map[string][]byte{
		bundleFile: []byte(base64.StdEncoding.EncodeToString(bundle)), outputFile: output,
		keyFile: []byte(base64.StdEncoding.EncodeToString(key) + "\n"),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, bundleFile, outputFile, keyFile
}

func TestDiscloseAndVerifyDisclosure(t *testing.T) {
	dir, bundleFile, outputFile, keyFile := discloseFixture(t)
	out := filepath.Join(dir, "disclosure.json")
	code, _, stderr := attRun(t, "", "disclose", "--bundle", bundleFile, "--output", outputFile, "--key-file", keyFile,
		"--where", "Observation.status = 'final'", "--out", out)
	if code != 0 {
		t.Fatalf("disclose: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "disclosed entry 1: Observation/") {
		t.Fatalf("disclose said %q", stderr)
	}
	code, stdout, stderr := attRun(t, "", "verify", "--disclosure", out, "--allow-simulated", "--json")
	if code != 0 {
		t.Fatalf("verify --disclosure: exit %d\n%s%s", code, stdout, stderr)
	}
	var resp acds.VerifyResponse
	if err := json.Unmarshal([]byte(stdout), &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Valid || len(resp.Details.Disclosed) != 1 || resp.Details.Disclosed[0].Index != 1 || resp.Details.Entries == nil || resp.Details.BundleVersion != 2 {
		t.Fatalf("response: %s", stdout)
	}

	// The text report names what was disclosed; a tampered disclosure exits 1.
	if code, stdout, _ := attRun(t, "", "verify", "--disclosure", out, "--allow-simulated"); code != 0 || !strings.Contains(stdout, "disclosed:") {
		t.Fatalf("text report: exit %d\n%s", code, stdout)
	}
	raw, _ := os.ReadFile(out)
	tampered := filepath.Join(dir, "tampered.json")
	os.WriteFile(tampered, bytes.Replace(raw, []byte(`"final"`), []byte(`"amended"`), 1), 0o600)
	if code, stdout, _ := attRun(t, "", "verify", "--disclosure", tampered, "--allow-simulated"); code != 1 || !strings.Contains(stdout, "disclosure") {
		t.Fatalf("tampered: exit %d\n%s", code, stdout)
	}

	// --html writes the report page for a disclosure too: the disclosure
	// check and the disclosed entries, or the check failed for a tampered one.
	page := filepath.Join(dir, "report.html")
	if code, _, stderr := attRun(t, "", "verify", "--disclosure", out, "--allow-simulated", "--html", page); code != 0 {
		t.Fatalf("--disclosure --html: exit %d: %s", code, stderr)
	}
	html, _ := os.ReadFile(page)
	for _, want := range []string{"Disclosed entries", `id="disclosed"`, resp.Details.Disclosed[0].Ref, "every disclosed entry is under the signed commitment"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("the disclosure report lacks %q", want)
		}
	}
	if code, _, _ := attRun(t, "", "verify", "--disclosure", tampered, "--allow-simulated", "--html", page); code != 1 {
		t.Fatalf("tampered --html: exit %d", code)
	}
	html, _ = os.ReadFile(page)
	if bytes.Contains(html, []byte(`id="disclosed"`)) || !bytes.Contains(html, []byte("the disclosure did not verify")) {
		t.Error("a tampered disclosure's report lists disclosed entries")
	}

	// --select by reference, through a request record.
	bundle, _ := os.ReadFile(bundleFile)
	output, _ := os.ReadFile(outputFile)
	key, _ := os.ReadFile(keyFile)
	rec, _ := json.Marshal(acds.Request{RequestID: "r", Status: acds.StatusCompleted, Result: &acds.Result{
		OutputFormat: acds.OutputFHIRR4, Output: output, OutputDigest: attestation.Digest(output),
		AttestationBundle: string(bundle), DisclosureKey: strings.TrimSpace(string(key))}})
	recFile := filepath.Join(dir, "record.json")
	os.WriteFile(recFile, rec, 0o600)
	var ref string
	for _, e := range mustEntries(t, output) {
		if r := disclosure.Ref(e); strings.HasPrefix(r, "Patient/") {
			ref = r
		}
	}
	code, stdout, stderr = attRun(t, "", "disclose", "--record", recFile, "--select", ref)
	if code != 0 {
		t.Fatalf("disclose --record: exit %d: %s", code, stderr)
	}
	if code, _, _ := attRun(t, stdout, "verify", "--disclosure", "-", "--allow-simulated"); code != 0 {
		t.Fatalf("verify --disclosure -: exit %d", code)
	}
}

func mustEntries(t *testing.T, output []byte) [][]byte {
	t.Helper()
	e, err := disclosure.Entries(output)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDiscloseRefuses(t *testing.T) {
	dir, bundleFile, outputFile, keyFile := discloseFixture(t)
	wrongKey := filepath.Join(dir, "wrong")
	os.WriteFile(wrongKey, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{6}, 32))), 0o600)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--bundle", bundleFile, "--output", outputFile, "--key-file", wrongKey, "--select", "Patient/x"}, 1, "not this output's"},
		{[]string{"--bundle", bundleFile, "--output", outputFile, "--key-file", keyFile, "--select", "Patient/nope"}, 1, "no entry of the output"},
		{[]string{"--bundle", bundleFile, "--output", outputFile, "--key-file", keyFile, "--where", "Observation.status"}, 1, "want a boolean"},
		{[]string{"--bundle", bundleFile, "--output", outputFile, "--key-file", keyFile, "--where", "Observation.("}, 2, "--where"},
		{[]string{"--bundle", bundleFile, "--output", outputFile, "--key-file", keyFile}, 2, "usage"},
		{[]string{"--bundle", bundleFile, "--select", "Patient/x"}, 2, "usage"},
		{[]string{"--bundle", bundleFile, "--output", keyFile, "--key-file", keyFile, "--select", "Patient/x"}, 2, "--output"},
		// DESIGN §8's form with a bare output: the key is not there.
		{[]string{"--bundle", bundleFile, "--output", outputFile, "--select", "Patient/x"}, 2, "holds the disclosureKey, or give --key-file"},
	} {
		code, _, stderr := attRun(t, "", append([]string{"disclose"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.says) {
			t.Errorf("disclose %v: exit %d, %q; want %d saying %q", c.args, code, stderr, c.code, c.says)
		}
	}
}

// TestDiscloseDesignForm: DESIGN §8's form, --bundle, --output and
// --select alone, works when --output is the saved request record (GET
// /v1/requests/{id}), which holds the output and its disclosureKey.
func TestDiscloseDesignForm(t *testing.T) {
	dir, bundleFile, outputFile, keyFile := discloseFixture(t)
	output, _ := os.ReadFile(outputFile)
	bundle, _ := os.ReadFile(bundleFile)
	key, _ := os.ReadFile(keyFile)
	rec, err := json.Marshal(acds.Request{RequestID: "req-disclose", Kind: acds.KindProcess, Status: acds.StatusCompleted,
		Result: &acds.Result{OutputFormat: acds.OutputFHIRR4, Output: output, AttestationBundle: string(bundle), DisclosureKey: strings.TrimSpace(string(key))}})
	if err != nil {
		t.Fatal(err)
	}
	recFile := filepath.Join(dir, "record.json")
	if err := os.WriteFile(recFile, rec, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "d.json")
	code, _, stderr := attRun(t, "", "disclose", "--bundle", bundleFile, "--output", recFile, "--select", "Patient/"+firstPatientID(t, output), "--out", out)
	if code != 0 {
		t.Fatalf("disclose: exit %d: %s", code, stderr)
	}
	if code, stdout, stderr := attRun(t, "", "verify", "--disclosure", out, "--allow-simulated"); code != 0 {
		t.Fatalf("verify --disclosure: exit %d\n%s%s", code, stdout, stderr)
	}
}

// firstPatientID returns the id of the output's first Patient entry.
func firstPatientID(t *testing.T, output []byte) string {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource struct{ ResourceType, ID string } `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(output, &b); err != nil {
		t.Fatal(err)
	}
	for _, e := range b.Entry {
		if e.Resource.ResourceType == "Patient" {
			return e.Resource.ID
		}
	}
	t.Fatal("no Patient in the output")
	return ""
}
