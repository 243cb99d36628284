package conformance_test

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/internal/conformance"
	"github.com/acds-project/acds/internal/portal"
	"github.com/acds-project/acds/service"
)

// TestHandler runs the suite against the real service (package service:
// SQLite store, simulated SEV-SNP enclave, FHIR pipeline, in-process
// notary, verifier) behind httptest, fetching from the demo portal on
// loopback over HTTPS.
func TestHandler(t *testing.T) {
	demo, err := portal.NewDemo(portal.Options{Patients: 1, Seed: 1})
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
	ts := httptest.NewServer(svc.Handler())
	t.Cleanup(ts.Close)

	_, port, _ := net.SplitHostPort(ln.Addr().String())
	rep := conformance.Run(t, conformance.Config{
		BaseURL: ts.URL,
		Client:  ts.Client(),
		Fetch: conformance.FetchTarget{
			SystemType: "fhir-basic",
			PortalURL:  "https://localhost:" + port + "/fhir", // a DNS name: notarized sessions send SNI
			Username:   portal.DemoUsername,
			Password:   portal.DemoPassword,
			RecordID:   demo.Patients()[0].ID,
		},
		Timeout: 30 * time.Second,
	})
	if len(rep.Endpoints) != 5 {
		t.Errorf("the suite called %d of SPEC's 5 endpoints: %v", len(rep.Endpoints), rep.Endpoints)
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
