package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/internal/demo/demoportal/demoportaltest"
	"github.com/acds-project/acds/mpctls/notary"
)

// TestVerifyExternalNotaryKey: a bundle of `acds serve --notary` (an
// external `acds notary`) verifies offline with `acds verify --notary-key`
// given the PEM the notary printed, and does not without it (nothing else
// names that key to the verifier). Before the flag, such a bundle could
// not be verified offline at all.
func TestVerifyExternalNotaryKey(t *testing.T) {
	demo := demoportaltest.Start(t, demoportal.Options{Patients: 1, Seed: 3})
	dir := t.TempDir()
	caFile := filepath.Join(dir, "portal-ca.pem")
	if err := os.WriteFile(caFile, demo.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, naddr, stopNotary := startNotaryCmd(t, "--addr", "127.0.0.1:0", "--key", filepath.Join(dir, "notary.key"),
		"--portal-ca", caFile, "--allow-private-targets")
	pub, err := notary.ParsePublicKey(out)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := notary.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "notary.pub")
	if err := os.WriteFile(keyFile, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--portal-ca", caFile, "--allow-private-portals", "--notary", naddr, "--notary-key", keyFile)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, _ := client.New(base, &client.Options{PollInterval: 50 * time.Millisecond})
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	acc, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic,
		PortalURL: "https://localhost:" + demo.Port + "/fhir", RecordID: demo.Patients()[0].ID,
		Username: demoportal.Username, Password: demoportal.Password, OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("fetch: %+v %v\nlogs:\n%s", rec, err, logs)
	}
	bundleFile, outputFile := filepath.Join(dir, "bundle.b64"), filepath.Join(dir, "output.json")
	if err := os.WriteFile(bundleFile, []byte(rec.Result.AttestationBundle), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outputFile, rec.Result.Output, 0o600); err != nil {
		t.Fatal(err)
	}
	if stop() != 0 || stopNotary() != 0 {
		t.Error("serve or notary did not stop cleanly")
	}

	code, stdout, stderr := attRun(t, "", "verify", bundleFile, "--allow-simulated", "--output", outputFile)
	if code != 1 || !strings.Contains(stdout+stderr, "not trusted") {
		t.Errorf("without --notary-key: exit %d, want 1 naming the untrusted notary key\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = attRun(t, "", "verify", bundleFile, "--allow-simulated", "--output", outputFile, "--notary-key", keyFile, "--json")
	var res acds.VerifyResponse
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil || !res.Valid || !res.MPCTLSVerified {
		t.Errorf("with --notary-key: exit %d, want 0 and mpcTlsVerified\n%s%s", code, stdout, stderr)
	}
	// The signed coverage is in the request's result, in the details and
	// in the text report: every FHIR request of the fetch.
	if c := rec.Result.Coverage; c == nil || !c.Everything || !res.Details.Coverage.Everything || len(res.Details.Coverage.Requests) != len(c.Requests) {
		t.Errorf("coverage: result %+v, details %+v", rec.Result.Coverage, res.Details.Coverage)
	}
	code, stdout, _ = attRun(t, "", "verify", bundleFile, "--allow-simulated", "--output", outputFile, "--notary-key", keyFile)
	if code != 0 || !strings.Contains(stdout, "coverage:          Patient/$everything, as the portal's CapabilityStatement advertised") ||
		!strings.Contains(stdout, "    GET /fhir/metadata HTTP/1.1  HTTP 200, pages 1, entries 0") ||
		!strings.Contains(stdout, "    GET /fhir/Patient/"+demo.Patients()[0].ID+"/$everything HTTP/1.1  HTTP 200, pages 1") {
		t.Errorf("text report: exit %d\n%s", code, stdout)
	}
	// A key file that holds no key is a usage error, not a verdict.
	junk := filepath.Join(dir, "junk.pub")
	if err := os.WriteFile(junk, []byte("no key here"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := attRun(t, "", "verify", bundleFile, "--allow-simulated", "--notary-key", junk); code != 2 || !strings.Contains(stderr, "--notary-key") {
		t.Errorf("junk key file: exit %d, %s", code, stderr)
	}
}

// TestUsageErrorsSayWhy: each wrong combination of arguments exits 2
// with a line that says what is wrong, before the usage (they printed
// the usage alone).
func TestUsageErrorsSayWhy(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify"}, "no BUNDLE"},
		{[]string{"verify", "a.b64", "b.b64"}, "one BUNDLE at a time"},
		{[]string{"verify", "a.b64", "--server", "https://127.0.0.1:1"}, "not both"},
		{[]string{"verify", "--server", "https://127.0.0.1:1", "--output", "o.json"}, "not --server"},
		{[]string{"verify", "--disclosure", "d.json", "a.b64"}, "--disclosure takes no BUNDLE"},
		{[]string{"disclose", "--output", "o.json", "--select", "Patient/p"}, "need --bundle"},
		{[]string{"disclose", "--record", "r.json"}, "nothing to disclose"},
		{[]string{"disclose", "--select", "Patient/p"}, "no input"},
		{[]string{"disclose", "--record", "r.json", "--bundle", "a.b64", "--select", "Patient/p"}, "not both"},
		{[]string{"disclose", "--record", "r.json", "--select", "Patient/p", "extra"}, "unexpected argument"},
		{[]string{"measure", "a", "b"}, "one FILE at most"},
		{[]string{"fhir", "validate"}, "no FILE"},
		{[]string{"fhir", "fmt", "a.json", "b.json"}, "want one FILE"},
	} {
		code, _, stderr := attRun(t, "", c.args...)
		if first, _, _ := strings.Cut(stderr, "\n"); code != 2 || !strings.Contains(first, c.want) {
			t.Errorf("%q: exit %d, first line %q; want 2 and %q", c.args, code, first, c.want)
		}
	}
}
