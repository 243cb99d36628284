package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/internal/testrig/conformance"
	"github.com/acds-project/acds/service"
)

// TestHandler runs the suite against the real service (package service:
// SQLite store, simulated SEV-SNP enclave, FHIR pipeline, in-process
// notary, verifier) behind httptest, fetching from the demo portal on
// loopback over HTTPS.
func TestHandler(t *testing.T) {
	h, target := openService(t)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	rep := conformance.Run(t, conformance.Config{BaseURL: ts.URL, Client: ts.Client(), Fetch: target, Timeout: 30 * time.Second})
	if len(rep.Endpoints) != 5 {
		t.Errorf("the suite called %d of SPEC's 5 endpoints: %v", len(rep.Endpoints), rep.Endpoints)
	}
}

// openService opens the real service in a fresh data directory with the
// demo portal on loopback, and returns its handler and the portal's
// fetch-and-attest target.
func openService(t *testing.T) (http.Handler, conformance.FetchTarget) {
	t.Helper()
	demo, err := demoportal.New(demoportal.Options{Patients: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = demo.Serve(ln) }()
	t.Cleanup(func() { _ = demo.Close() })

	// A simulated chip with 2048-bit ARK and ASK keys keeps the test quick
	// (Open makes AMD's 4096-bit ones for a new installation).
	dir := t.TempDir()
	if _, err := sim.NewBackend(filepath.Join(dir, "enclave"), sim.Options{RSABits: 2048}); err != nil {
		t.Fatal(err)
	}
	svc, err := service.Open(context.Background(), service.Options{DataDir: dir, PortalCA: demo.CACertPEM(), AllowPrivatePortals: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })

	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return svc.Handler(), conformance.FetchTarget{
		SystemType: "fhir-basic",
		PortalURL:  "https://localhost:" + port + "/fhir", // a DNS name: notarized sessions send SNI
		Username:   demoportal.Username,
		Password:   demoportal.Password,
		RecordID:   demo.Patients()[0].ID,
	}
}

// drifts break SPEC in one way per endpoint, each by rewriting one field
// of the real service's JSON answer, and say what the suite must report.
var drifts = []struct {
	path, field string
	value       any
	report      string
}{
	{"/v1/health", "version", 1, `"version" is a number 1, want a JSON string`},
	{"/v1/health", "uptime", "0:00", `uptime "0:00" is not hours and minutes`},
	{"/v1/auth/anon", "pseudonym", 7, `"pseudonym" is a number 7, want a JSON string`},
	{"/v1/process", "message", "accepted", "has a message field"},
	{"/v1/fetch-and-attest", "status", "queued", `status "queued", want processing`},
	{"/v1/verify", "mpcTlsVerified", "true", `"mpcTlsVerified" is a string true, want a JSON boolean`},
}

// drifted is h with the drifts applied to its 2xx JSON answers, and
// answering 403 instead of 401 to a request without Authorization.
func drifted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body, code := rec.Body.Bytes(), rec.Code
		if code == http.StatusUnauthorized && r.Header.Get("Authorization") == "" {
			code = http.StatusForbidden
		}
		var obj map[string]any
		if code/100 == 2 && json.Unmarshal(body, &obj) == nil {
			for _, d := range drifts {
				if d.path == r.URL.Path {
					obj[d.field] = d.value
				}
			}
			body, _ = json.Marshal(obj)
		}
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(code)
		_, _ = w.Write(body)
	})
}

// TestSuiteCatchesDrift runs the suite, in a child process, against the
// real service behind drifted, and checks that it fails and reports every
// drift: the suite's checks bite.
func TestSuiteCatchesDrift(t *testing.T) {
	if os.Getenv("ACDS_CONFORMANCE_DRIFTED_CHILD") == "1" {
		h, target := openService(t)
		ts := httptest.NewServer(drifted(h))
		t.Cleanup(ts.Close)
		conformance.Run(t, conformance.Config{BaseURL: ts.URL, Client: ts.Client(), Fetch: target, Timeout: 30 * time.Second})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesDrift$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ACDS_CONFORMANCE_DRIFTED_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a service that breaks SPEC:\n%s", out)
	}
	want := []string{"HTTP 403, want 401"}
	for _, d := range drifts {
		want = append(want, d.report)
	}
	for _, w := range want {
		if !bytes.Contains(out, []byte(w)) {
			t.Errorf("the suite did not report %q", w)
		}
	}
	if t.Failed() {
		t.Logf("the suite's output:\n%s", out)
	}
}

// TestServe runs the suite against a running `acds serve` (CI step
// 15-conformance.sh): ACDS_CONFORMANCE_URL is its base URL, and the
// ACDS_CONFORMANCE_{SYSTEM_TYPE,PORTAL_URL,USERNAME,PASSWORD,RECORD_ID}
// the fetch-and-attest target it can reach. It skips when
// ACDS_CONFORMANCE_URL is unset.
func TestServe(t *testing.T) {
	base := os.Getenv("ACDS_CONFORMANCE_URL")
	if base == "" {
		t.Skip("ACDS_CONFORMANCE_URL is not set")
	}
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("ACDS_CONFORMANCE_URL is set but %s is not", name)
		}
		return v
	}
	rep := conformance.Run(t, conformance.Config{
		BaseURL: base,
		Fetch: conformance.FetchTarget{
			SystemType: env("ACDS_CONFORMANCE_SYSTEM_TYPE"),
			PortalURL:  env("ACDS_CONFORMANCE_PORTAL_URL"),
			Username:   env("ACDS_CONFORMANCE_USERNAME"),
			Password:   env("ACDS_CONFORMANCE_PASSWORD"),
			RecordID:   env("ACDS_CONFORMANCE_RECORD_ID"),
		},
	})
	if len(rep.Endpoints) != 5 {
		t.Errorf("the suite called %d of SPEC's 5 endpoints: %v", len(rep.Endpoints), rep.Endpoints)
	}
}
