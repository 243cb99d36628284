package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/service"
)

// newServer is an ACDS server on loopback: with real = true, the real
// service (package service: SQLite store in a temporary data directory,
// FHIR pipeline, simulated enclave, package verify); otherwise
// servertest's fakes, whose enclave has no evidence, so its bundles never
// verify.
func newServer(t *testing.T, real bool) *httptest.Server {
	t.Helper()
	var h http.Handler
	if real {
		h = openService(t, false).Handler()
	} else {
		srv, err := server.New(server.Config{Store: servertest.NewMemStore(), Pipeline: &servertest.Pipeline{},
			Enclave: servertest.NewEnclave(), Verifier: servertest.Verifier{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close(context.Background()) })
		h = srv.Handler()
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// openService opens the real service in a temporary data directory, with
// an attested TLS key when tlsKey is set.
func openService(t *testing.T, tlsKey bool) *service.Service {
	t.Helper()
	// A fresh installation with 2048-bit simulated ARK and ASK keys, quicker
	// to make than the 4096-bit ones (as AMD's) a new data dir gets.
	dir := t.TempDir()
	if _, err := sim.NewBackend(filepath.Join(dir, "enclave"), sim.Options{RSABits: 2048}); err != nil {
		t.Fatal(err)
	}
	svc, err := service.Open(context.Background(), service.Options{DataDir: dir, TLS: tlsKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	return svc
}

// newTLSServer serves the real service over attested TLS on loopback (as
// `acds serve --tls`) and returns its https URL and the enclave's code
// hash (hex).
func newTLSServer(t *testing.T) (string, string) {
	t.Helper()
	svc := openService(t, true)
	cfg, err := svc.TLSConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: svc.Handler(), TLSConfig: cfg, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = hs.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "https://" + ln.Addr().String(), hex.EncodeToString(svc.Enclave().Measurement())
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

// TestQuickstartAttestedTLS runs the quickstart against the real service
// over attested TLS: the client checks the enclave's evidence for the
// given code hash before it sends anything, and refuses another hash.
func TestQuickstartAttestedTLS(t *testing.T) {
	url, measurement := newTLSServer(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-server", url, "-measurement", measurement, "-allow-simulated", "-out", filepath.Join(t.TempDir(), "out")}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "valid=true") {
		t.Errorf("stdout lacks valid=true:\n%s", stdout.String())
	}
	other := strings.Repeat("00", len(measurement)/2)
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"-server", url, "-measurement", other, "-allow-simulated"}, &stdout, &stderr); code != 1 {
		t.Fatalf("another code hash: exit %d, want 1\n%s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "session anon_") {
		t.Error("the client opened a session with an enclave it did not accept")
	}
	if !strings.Contains(stderr.String(), "measurement") {
		t.Errorf("stderr does not name the measurement check: %s", stderr.String())
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
