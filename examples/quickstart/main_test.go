package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/verify"
)

// newServer is an ACDS server on loopback: with real = true, the FHIR
// pipeline, a simulated enclave and package verify (the wiring of
// examples/embed); otherwise servertest's fakes, whose enclave has no
// evidence, so its bundles never verify.
func newServer(t *testing.T, real bool) *httptest.Server {
	t.Helper()
	cfg := server.Config{Store: servertest.NewMemStore(), Pipeline: &servertest.Pipeline{},
		Enclave: servertest.NewEnclave(), Verifier: servertest.Verifier{}}
	if real {
		encl, err := sim.Open(context.Background(), t.TempDir(), attestation.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := verify.TrustEnclave(verify.Policy{}, encl.BootEvidence(), encl.Measurement())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Pipeline, cfg.Enclave, cfg.Verifier = pipeline{}, enclave{encl}, verifier{verify.New(p)}
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func TestQuickstart(t *testing.T) {
	ts := newServer(t, true)
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-server", ts.URL, "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"session anon_", "accepted request ", "completed: fhir_r4, ", "valid=true"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	saved, err := os.ReadFile(filepath.Join(out, "output.json"))
	if err != nil || !bytes.Contains(saved, []byte("Chalmers")) {
		t.Errorf("output.json = %.100s, %v", saved, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "attestation.b64")); err != nil || len(bytes.TrimSpace(b)) == 0 {
		t.Errorf("attestation.b64: %v", err)
	}
}

func TestQuickstartFailures(t *testing.T) {
	ts := newServer(t, true)
	fake := newServer(t, false)
	dir := t.TempDir()
	notFHIR := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(notFHIR, []byte(`{"hello":"world"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want int
		says string
	}{
		{"invalid FHIR", []string{"-server", ts.URL, "-bundle", notFHIR}, 1, "invalid-fhir"},
		{"unknown format", []string{"-server", ts.URL, "-format", "pdf"}, 1, "unsupported-output-format"},
		{"missing bundle file", []string{"-server", ts.URL, "-bundle", filepath.Join(dir, "nope")}, 2, "-bundle"},
		{"https without measurement", []string{"-server", "https://127.0.0.1:1"}, 2, "-measurement"},
		{"bundle that does not verify", []string{"-server", fake.URL}, 1, "did not verify"},
		{"no server", []string{"-server", "http://127.0.0.1:1"}, 1, "health"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.want {
				t.Fatalf("exit %d, want %d\n%s", code, tc.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Errorf("stderr lacks %q: %s", tc.says, stderr.String())
			}
		})
	}
}

// The seams of the real server (as in examples/embed).

type pipeline struct{}

func (pipeline) Check(ctx context.Context, input []byte) error {
	return fhirError(fhir.Check(input, fhir.Options{}))
}

func (pipeline) Process(ctx context.Context, input []byte, o server.ProcessOptions) (*server.Output, error) {
	out, err := fhir.Process(input, fhir.Options{Format: o.Format, Source: o.Source, Measurement: o.Measurement, Now: o.Now})
	if err != nil {
		return nil, fhirError(err)
	}
	return &server.Output{JSON: out.JSON, Digest: out.Digest}, nil
}

func fhirError(err error) error {
	var inv *fhir.InvalidError
	if !errors.As(err, &inv) {
		return err
	}
	oo, _ := inv.Outcome.MarshalJSON()
	return &server.InvalidFHIRError{Detail: fmt.Sprintf("%d errors", inv.Outcome.ErrorCount()), OperationOutcome: oo}
}

type enclave struct{ e *attestation.Enclave }

func (s enclave) Profile() string                     { return s.e.Profile() }
func (s enclave) Measurement() string                 { return hex.EncodeToString(s.e.Measurement()) }
func (s enclave) Seal(p, ad []byte) ([]byte, error)   { return s.e.Seal(p, ad) }
func (s enclave) Unseal(c, ad []byte) ([]byte, error) { return s.e.Open(c, ad) }
func (s enclave) BootEvidence() acds.Attestation {
	b := s.e.BootEvidence()
	return acds.Attestation{Profile: b.Profile, Measurement: s.Measurement(), Evidence: b.Evidence, Certificates: [][]byte{},
		SigningKey: b.SigningKey, TLSKey: b.TLSKey, BootNonce: b.Nonce, Boot: s.e.MarshalBootEvidence()}
}
func (s enclave) Attest(ctx context.Context, c server.Claims) ([]byte, error) {
	return s.e.Attest(ctx, attestation.Claims{RequestID: c.RequestID, OutputFormat: c.OutputFormat, OutputDigest: c.OutputDigest,
		IssuedAt: c.IssuedAt, Source: attestation.Source{Kind: c.Source, InputDigest: c.InputDigest}}, nil)
}

type verifier struct{ v *verify.Verifier }

func (s verifier) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
	verifyBundle := func() (*verify.Result, error) { return s.v.VerifyOutput(bundle, output) }
	if output == nil {
		verifyBundle = func() (*verify.Result, error) { return s.v.Verify(bundle) }
	}
	r, err := verifyBundle()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", server.ErrMalformedBundle, err)
	}
	resp := r.Response()
	return &resp, nil
}
