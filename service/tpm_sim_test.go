//go:build tpmsim

// With go-tpm-tools' TPM simulator (cgo): go test -tags tpmsim ./service/

package service_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/tpm/device"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/service"
	"github.com/acds-project/acds/verify"
	"github.com/google/go-tpm-tools/simulator"
)

// A service on a TPM (the simulator): a process request completes, its
// bundle verifies offline under a policy naming the TPM's measurement and
// the AK the service published (DataDir/tpm-ak.pem), and not under
// another measurement; attested TLS serves the TPM evidence, which a
// client checking it with that policy accepts.
func TestTPMService(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tpm, err := simulator.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer tpm.Close()
	dir := t.TempDir()
	b, err := device.Open(ctx, device.Options{Transport: tpm, StateDir: filepath.Join(dir, "enclave")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	svc, c := open(t, service.Options{DataDir: dir, Enclave: b, TLS: true})
	if h, err := c.Health(ctx); err != nil || h.Enclave != attestation.ProfileTPM {
		t.Fatalf("health: %+v %v", h, err)
	}
	// GET /v1/attestation publishes the AK the server wrote to its data
	// directory (DESIGN §3 tpmAkPublicKey).
	att, err := c.Attestation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	published, err := os.ReadFile(filepath.Join(dir, service.TPMAKFile))
	if err != nil {
		t.Fatal(err)
	}
	if att.TPMAKPublicKey == "" || att.TPMAKPublicKey != string(published) {
		t.Fatalf("tpmAkPublicKey %q, the data directory's %q", att.TPMAKPublicKey, published)
	}
	c, _ = session(t, ctx, c)
	rec := process(t, ctx, c, acds.OutputFHIRR4)
	bundle, _ := base64.StdEncoding.DecodeString(rec.Result.AttestationBundle)

	policy, _, err := verify.LoadPolicy(verify.PolicyFiles{
		Measurements: []string{hex.EncodeToString(b.Measurement())},
		TPMAKs:       []string{filepath.Join(dir, service.TPMAKFile)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := mustVerifier(t, policy).VerifyOutput(bundle, rec.Result.Output); err != nil || !r.Valid {
		t.Fatalf("offline verification with the published AK: %+v %v", r, err)
	}
	other := policy
	other.Measurements = map[string][][]byte{attestation.ProfileTPM: {bytes.Repeat([]byte{1}, 32)}}
	if r, err := mustVerifier(t, other).VerifyOutput(bundle, rec.Result.Output); err != nil || r.Valid {
		t.Fatalf("verified under another measurement: %+v %v", r, err)
	}
	// POST /v1/verify trusts the server's own TPM.
	if v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle}); err != nil || !v.Valid {
		t.Fatalf("POST /v1/verify: %+v %v", v, err)
	}

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
	defer hs.Close()
	for _, tc := range []struct {
		name string
		p    verify.Policy
		ok   bool
	}{{"this TPM", policy, true}, {"another measurement", other, false}} {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, // the evidence, not a CA, decides (VerifyConnection)
			VerifyConnection:   mustVerifier(t, tc.p).VerifyConnection,
		}}}
		tc2, err := client.New("https://"+ln.Addr().String(), &client.Options{HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tc2.Health(ctx); (err == nil) != tc.ok {
			t.Errorf("attested TLS, %s: %v", tc.name, err)
		}
	}
}
