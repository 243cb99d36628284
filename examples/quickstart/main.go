// Command quickstart is the smallest useful ACDS client: against a running
// server (`go run ./cmd/acds serve`, or `acds demo --keep`) it opens an
// anonymous session, submits a FHIR R4 Bundle for processing in the
// enclave, waits for the result, has the server verify the attestation
// bundle together with the output, and saves both.
//
//	go run ./examples/quickstart [-server http://127.0.0.1:8080] [-bundle FILE] [-format fhir_r4|fhir_r4_deidentified] [-out DIR]
//
// For an https server started with `acds serve --tls`, the client checks
// the enclave's attested TLS before sending anything: give the expected
// code hash with -measurement (what `acds measure` prints) and, for the
// simulated enclave of a development server, -allow-simulated.
//
// The files written to -out (output.json and attestation.b64) are what
// `acds verify attestation.b64 --output output.json` and
// examples/civerify check offline. Exit 0 when the request completed and
// verified, 1 otherwise, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/verify"
)

// sampleBundle is submitted when no -bundle is given.
const sampleBundle = `{"resourceType":"Bundle","type":"collection","entry":[
 {"fullUrl":"urn:uuid:7f8a4e1e-2b1c-4c55-9f2e-0a1b2c3d4e5f",
  "resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Chalmers","given":["Peter"]}],"birthDate":"1974-12-25"}}]}`

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serverURL := fs.String("server", "http://127.0.0.1:8080", "ACDS server base URL")
	bundleFile := fs.String("bundle", "", "FHIR R4 Bundle (JSON) to process; empty: a one-patient sample")
	format := fs.String("format", acds.OutputFHIRR4, "outputFormat: fhir_r4 or fhir_r4_deidentified")
	outDir := fs.String("out", "", "directory to save output.json and attestation.b64 in")
	measurement := fs.String("measurement", "", "https only: the enclave code hash (hex) to accept")
	allowSim := fs.Bool("allow-simulated", false, "https only: accept a simulated enclave (development servers)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "quickstart: "+format+"\n", a...)
		return code
	}
	bundle := []byte(sampleBundle)
	if *bundleFile != "" {
		b, err := os.ReadFile(*bundleFile)
		if err != nil {
			return fail(2, "-bundle: %v", err)
		}
		bundle = b
	}

	opts := &client.Options{PollInterval: 100 * time.Millisecond}
	var (
		c   *client.Client
		err error
	)
	if strings.HasPrefix(*serverURL, "https://") {
		ms, perr := verify.ParseMeasurements(*measurement)
		if perr != nil || *measurement == "" {
			return fail(2, "an https server is checked by attested TLS: give -measurement HEX (acds measure)")
		}
		p := verify.Policy{UnsafeAllowSimulation: *allowSim, UnsafeTrustBundleSimulatedRoot: *allowSim, Measurements: ms}
		ch, cerr := attested.NewChecker(p, nil)
		if cerr != nil {
			return fail(2, "%v", cerr)
		}
		c, err = ch.Client(*serverURL, opts)
	} else {
		c, err = client.New(*serverURL, opts)
	}
	if err != nil {
		return fail(2, "%v", err)
	}

	h, err := c.Health(ctx)
	if err != nil {
		return fail(1, "health: %v", err)
	}
	if h.Status != "healthy" {
		return fail(1, "health: the server reports itself %s", h.Status)
	}
	fmt.Fprintf(stdout, "server %s, version %s, enclave %s\n", *serverURL, h.Version, h.Enclave)
	sess, err := c.Anon(ctx, "")
	if err != nil {
		return fail(1, "session: %v", err)
	}
	c = c.WithToken(sess.Token)
	fmt.Fprintf(stdout, "session %s\n", sess.Pseudonym)

	acc, err := c.Process(ctx, acds.ProcessRequest{Data: bundle, OutputFormat: *format})
	var p *acds.Problem
	if errors.As(err, &p) {
		// e.g. invalid-fhir with the validator's OperationOutcome.
		return fail(1, "the server refused the bundle: %s: %s", p.Code(), p.Detail)
	}
	if err != nil {
		return fail(1, "process: %v", err)
	}
	fmt.Fprintf(stdout, "accepted request %s\n", acc.RequestID)
	rec, err := c.Wait(ctx, acc.RequestID)
	if errors.As(err, &p) {
		// The request ended failed: err is its problem.
		return fail(1, "request %s failed: %v", acc.RequestID, p)
	}
	if err != nil {
		return fail(1, "wait: %v", err)
	}
	fmt.Fprintf(stdout, "completed: %s, %d bytes, %s\n", rec.Result.OutputFormat, len(rec.Result.Output), rec.Result.OutputDigest)

	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: rec.Result.Output})
	if err != nil {
		return fail(1, "verify: %v", err)
	}
	fmt.Fprintf(stdout, "verified by the server: valid=%t enclaveHashMatch=%t teeQuoteVerified=%t mpcTlsVerified=%t\n",
		v.Valid, v.EnclaveHashMatch, v.TEEQuoteVerified, v.MPCTLSVerified)
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			return fail(1, "-out: %v", err)
		}
		if err := os.WriteFile(filepath.Join(*outDir, "output.json"), rec.Result.Output, 0o644); err != nil {
			return fail(1, "-out: %v", err)
		}
		if err := os.WriteFile(filepath.Join(*outDir, "attestation.b64"), []byte(rec.Result.AttestationBundle+"\n"), 0o644); err != nil {
			return fail(1, "-out: %v", err)
		}
		fmt.Fprintf(stdout, "saved %s and %s: verify them offline with acds verify or examples/civerify\n",
			filepath.Join(*outDir, "output.json"), filepath.Join(*outDir, "attestation.b64"))
	}
	if !v.Valid {
		return fail(1, "the attestation bundle did not verify: %v", v.Details.Reasons)
	}
	return 0
}
