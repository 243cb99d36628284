package main

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/internal/demoportal"
)

// TestServeFetchAndAttest runs the whole fetch-and-attest path of `acds
// serve` on loopback: the demo portal over HTTPS, the in-process notary,
// the MPC-TLS prover, the FHIR pipeline and the simulated enclave. The
// bundle verifies with mpcTlsVerified, and a wrong password fails the
// request with portal-auth-failed without the password anywhere.
func TestServeFetchAndAttest(t *testing.T) {
	demo, err := demoportal.New(demoportal.Options{Patients: 2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = demo.Serve(ln) }()
	t.Cleanup(func() { _ = demo.Close() })
	dir := t.TempDir()
	caFile := filepath.Join(dir, "portal-ca.pem")
	if err := os.WriteFile(caFile, demo.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--portal-ca", caFile, "--allow-private-portals")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, _ := client.New(base, &client.Options{PollInterval: 50 * time.Millisecond})
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	portalURL := "https://localhost:" + port + "/fhir" // notarized sessions need a DNS name (SNI)
	patient := demo.Patients()[0].ID

	acc, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: portalURL, RecordID: patient,
		Username: demoportal.Username, Password: demoportal.Password, OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("fetch: %+v %+v %v\nlogs:\n%s", rec, rec.Error, err, logs)
	}
	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: rec.Result.Output})
	if err != nil || !v.Valid || !v.MPCTLSVerified || v.Details.Source != acds.SourceMPCTLS || v.Details.PortalHost == "" {
		t.Fatalf("verify = %+v, %v", v, err)
	}
	raw, _ := base64.StdEncoding.DecodeString(rec.Result.AttestationBundle)
	if b, err := attestation.ParseBundle(raw); err != nil || len(b.NotaryStatements) == 0 {
		t.Fatalf("bundle without notary statements: %v", err)
	}

	const wrong = "WRONG-password-6612"
	acc, err = c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: portalURL, RecordID: patient,
		Username: demoportal.Username, Password: wrong, OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	rec, err = c.Wait(ctx, acc.RequestID)
	if !errors.Is(err, acds.ErrPortalAuthFailed) || rec.Status != acds.StatusFailed || rec.Error.Code() != acds.ProblemPortalAuthFailed {
		t.Fatalf("wrong password: %+v %+v %v", rec, rec.Error, err)
	}
	if strings.Contains(rec.Error.Detail, wrong) {
		t.Fatal("the password is in the problem")
	}
	if stop() != 0 {
		t.Fatal("serve did not stop cleanly")
	}
	for _, secret := range []string{wrong, demoportal.Password, sess.Token} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs contain %q", secret)
		}
	}
}
