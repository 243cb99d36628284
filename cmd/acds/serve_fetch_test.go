package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/internal/demo/demoportal/demoportaltest"
)

// TestServeFetchAndAttest runs the whole fetch-and-attest path of `acds
// serve` on loopback: the demo portal over HTTPS, the in-process notary,
// the MPC-TLS prover, the FHIR pipeline and the simulated enclave. The
// bundle verifies with mpcTlsVerified, and a wrong password fails the
// request with portal-auth-failed without the password anywhere.
func TestServeFetchAndAttest(t *testing.T) {
	demo := demoportaltest.Start(t, demoportal.Options{Patients: 2, Seed: 7})
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
	port := demo.Port
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

// TestServeRegistrations runs `acds serve --registrations FILE` against a
// demo portal that knows only the operator's client (its own id and
// redirect URI, private_key_jwt with the operator's key): a smart-form
// fetch completes, so the file's registration reached the connector and
// was used for the portal's origin. A file with a bad entry stops serve
// at start with exit 2 and a message naming the entry and the field.
func TestServeRegistrations(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const clientID, redirect = "operator-client", "https://acds.example/smart/callback"
	demo := demoportaltest.Start(t, demoportal.Options{Patients: 1, Seed: 7, ClientID: clientID, RedirectURI: redirect, ClientKey: &key.PublicKey})
	port := demo.Port

	dir := t.TempDir()
	caFile := filepath.Join(dir, "portal-ca.pem")
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	regFile := filepath.Join(dir, "registrations.json")
	for name, data := range map[string][]byte{
		caFile:                             demo.CACertPEM(),
		filepath.Join(dir, "operator.pem"): pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		regFile: []byte(`[{"origin": "https://localhost:` + port + `", "clientId": "` + clientID + `", "redirectUri": "` + redirect +
			`", "privateKeyFile": "operator.pem"}]`),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"origin": "https://a.example", "redirectUri": "https://acds.example/cb"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := runServe(context.Background(), env{args: []string{"--registrations", bad}, stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }}); code != 2 ||
		!strings.Contains(stderr.String(), "entry 1 (https://a.example): clientId: required") {
		t.Errorf("bad registrations: exit %d, %q", code, stderr.String())
	}

	base, logs, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--portal-ca", caFile, "--allow-private-portals", "--registrations", regFile)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, _ := client.New(base, &client.Options{PollInterval: 50 * time.Millisecond})
	sess, err := c.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(sess.Token)
	acc, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemSMARTForm, PortalURL: "https://localhost:" + port + "/fhir",
		RecordID: demo.Patients()[0].ID, Username: demoportal.Username, Password: demoportal.Password, OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("fetch with the operator's client: %+v %+v %v\nlogs:\n%s", rec, rec.Error, err, logs)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") || strings.Contains(logs.String(), key.D.String()) {
		t.Error("the logs carry the client's private key")
	}
}
