package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/verify"
)

const sampleBundle = `{"resourceType":"Bundle","type":"collection","entry":[
 {"fullUrl":"urn:uuid:7f8a4e1e-2b1c-4c55-9f2e-0a1b2c3d4e5f",
  "resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Chalmers","given":["Peter"]}],"birthDate":"1974-12-25"}}]}`

// start runs the example with dataDir on a free loopback port and returns
// the application's URL and a function that stops it and returns its exit
// code and stderr.
func start(t *testing.T, dataDir string) (string, func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-data-dir", dataDir}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no ready line: %v (exit %d, stderr %s)", err, <-done, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	app, _, _ := strings.Cut(strings.TrimPrefix(line, "application on "), ",")
	return strings.TrimSuffix(app, "/"), func() (int, string) {
		cancel()
		return <-done, stderr.String()
	}
}

// TestEmbed runs the example on a free loopback port: the application's
// own route still answers, and the ACDS API under /clinical/ accepts,
// processes and verifies a bundle (also offline with package verify), with
// Location headers under the prefix. The store is durable: after a
// restart with the same data directory the request and the session are
// still there.
func TestEmbed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "data")
	// The simulated chip with 2048-bit ARK and ASK keys, quicker to make
	// than the 4096-bit ones (as AMD's) of a new installation.
	if _, err := sim.NewBackend(filepath.Join(dataDir, "enclave"), sim.Options{RSABits: 2048}); err != nil {
		t.Fatal(err)
	}
	app, stop := start(t, dataDir)

	resp, err := http.Get(app + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "my clinic's application") {
		t.Fatalf("application route: %d %s", resp.StatusCode, body)
	}
	if resp, err := http.Get(app + "/v1/health"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the API leaked outside /clinical/: %v %v", resp, err)
	}

	c, err := client.New(app+"/clinical", &client.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Enclave != "sev-snp-sim" {
		t.Fatalf("health %+v %v", h, err)
	}
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// The raw 202 carries a Location under the prefix.
	req, _ := http.NewRequestWithContext(ctx, "POST", app+"/clinical/v1/process",
		strings.NewReader(`{"outputFormat":"fhir_r4","data":`+sampleBundle+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+sess.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var acc acds.Accepted
	_ = json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") != "/clinical/v1/requests/"+acc.RequestID {
		t.Fatalf("process: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	c = c.WithToken(sess.Token)
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("request: %+v %+v %v", rec, rec.Error, err)
	}
	if !bytes.Contains(rec.Result.Output, []byte(`"resourceType":"Provenance"`)) {
		t.Error("the output has no Provenance: the FHIR pipeline did not run")
	}
	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: rec.Result.Output})
	if err != nil || !v.Valid || !v.TEEQuoteVerified || !v.EnclaveHashMatch {
		t.Fatalf("verify %+v %v", v, err)
	}
	// Invalid FHIR is refused with the validator's outcome.
	_, err = c.Process(ctx, acds.ProcessRequest{OutputFormat: acds.OutputFHIRR4,
		Data: json.RawMessage(`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","birthDate":"yesterday"}}]}`)})
	var p *acds.Problem
	if !errors.As(err, &p) || p.Code() != acds.ProblemInvalidFHIR {
		t.Fatalf("invalid FHIR: %v", err)
	}
	// Offline, with this binary's code hash (what the simulated enclave
	// measures), trusting nothing the server says.
	self, err := sim.MeasureSelf()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(rec.Result.AttestationBundle)
	if err != nil {
		t.Fatal(err)
	}
	offline, err := verify.New(verify.Policy{Measurements: map[string][][]byte{attestation.ProfileSEVSNPSim: {self}},
		UnsafeAllowSimulation: true, UnsafeTrustBundleSimulatedRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := offline.VerifyOutput(raw, rec.Result.Output); err != nil || !r.Valid {
		t.Fatalf("offline verification: %+v %v", r, err)
	}
	if code, stderr := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "acds.db")); err != nil {
		t.Fatalf("no SQLite store in the data dir: %v", err)
	}

	// Restart on the same data directory: the session and the request
	// survived.
	app, stop = start(t, dataDir)
	c, err = client.New(app+"/clinical", &client.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.WithToken(sess.Token).Request(ctx, acc.RequestID)
	if err != nil || again.Status != acds.StatusCompleted || again.Result.OutputDigest != rec.Result.OutputDigest {
		t.Fatalf("after a restart: %+v %v", again, err)
	}
	if code, stderr := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
