package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
)

// TestVerifyJSONOmitsUnestablishedDetails: `acds verify --server --json`
// checks boot evidence only — there are no signed claims — so the details
// carry no issue time, request id, output digest or source rather than
// placeholders (a zero time, an empty source outside the documented values).
func TestVerifyJSONOmitsUnestablishedDetails(t *testing.T) {
	b, err := sim.NewBackend(t.TempDir(), sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := e.TLSCertificate(0)
	if err != nil {
		t.Fatal(err)
	}
	url := attTLSServer(t, cert)
	code, out, _ := attRun(t, "", "verify", "--server", url, "--json", "--allow-simulated")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var resp struct {
		Details map[string]json.RawMessage `json:"details"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"issuedAt", "requestId", "outputDigest", "source"} {
		if v, ok := resp.Details[k]; ok {
			t.Errorf("details.%s = %s, want it omitted", k, v)
		}
	}
	for _, k := range []string{"profile", "measurement", "reasons"} {
		if _, ok := resp.Details[k]; !ok {
			t.Errorf("details.%s missing", k)
		}
	}
}
