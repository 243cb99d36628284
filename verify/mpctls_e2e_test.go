package verify_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
	"github.com/acds-project/acds/mpctls/prover"
	"github.com/acds-project/acds/verify"
)

// End to end on loopback: a real notary relays the enclave's TLS session to
// a portal, the enclave attests the output with the notary's statement, and
// the verifier checks the statement (host, time window, notary key); a
// holder of the data re-checks the response with the presentation.
func TestMPCTLSWithRealNotary(t *testing.T) {
	const host = "portal.test"
	const body = `{"resourceType":"Bundle","type":"searchset"}`
	ca := notarytest.NewCA(t)
	n := notarytest.StartNotary(t, notary.Config{Roots: ca.Pool()})
	mux := http.NewServeMux()
	mux.HandleFunc("/fhir/Patient/7/$everything", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
	port := notarytest.StartTLSServer(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, host)}}, mux)

	d := &prover.Dialer{Notary: n.Addr, NotaryKeys: []ed25519.PublicKey{n.Key}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}}
	tr := &http.Transport{DialTLSContext: d.DialTLSContext, DisableCompression: true, MaxConnsPerHost: 1}
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("https://" + host + ":" + port + "/fhir/Patient/7/$everything")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if string(got) != body {
		t.Fatalf("portal answered %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results, err := d.FinalizeAll(ctx)
	if err != nil || len(results) != 1 {
		t.Fatalf("finalize: %d sessions, %v", len(results), err)
	}

	f := getFixture(t)
	e, err := attestation.New(context.Background(), f.backend, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := []byte("normalised output")
	bundle, err := e.Attest(context.Background(), attestation.Claims{
		RequestID: "req-e2e", OutputFormat: "fhir_r4", OutputDigest: attestation.Digest(out),
		Source: attestation.Source{Kind: acds.SourceMPCTLS, Sessions: []attestation.Session{
			{RequestLine: "GET /fhir/Patient/7/$everything HTTP/1.1", Host: host},
		}},
		NotaryKey: n.Key,
	}, [][]byte{results[0].Statement})
	if err != nil {
		t.Fatal(err)
	}

	p := verify.Policy{
		UnsafeAllowSimulation:          true,
		UnsafeTrustBundleSimulatedRoot: true,
		Measurements:                   map[string][][]byte{attestation.ProfileSEVSNPSim: {simMeasurement}},
		NotaryKeys:                     []ed25519.PublicKey{n.Key},
	}
	res, err := mustNew(t, p).VerifyOutput(bundle, out)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || !res.MPCTLSVerified || res.Response().Details.PortalHost != host {
		t.Fatalf("real notary: %v", res.Err())
	}
	// Without the notary key, only the development relaxation accepts it.
	p.NotaryKeys = nil
	if res, _ := mustNew(t, p).Verify(bundle); res.Valid || res.MPCTLSVerified {
		t.Fatal("untrusted notary accepted")
	}
	p.UnsafeTrustClaimedNotaryKey = true
	if res, _ := mustNew(t, p).Verify(bundle); !res.Valid {
		t.Fatalf("claimed notary key: %v", res.Err())
	}

	// The presentation re-checks the portal's response offline.
	p.UnsafeTrustClaimedNotaryKey = false
	p.NotaryKeys = []ed25519.PublicKey{n.Key}
	pres, err := results[0].PresentAll()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := pres.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	v := mustNew(t, p)
	_, disclosed, err := v.VerifyPresentation(bundle, 0, raw)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(disclosed.Data()), body) {
		t.Fatal("disclosed data lacks the portal's response")
	}
	raw[len(raw)-40] ^= 1
	if _, _, err := v.VerifyPresentation(bundle, 0, raw); !errors.Is(err, verify.ErrPresentation) {
		t.Fatalf("tampered presentation: %v", err)
	}
	if _, _, err := v.VerifyPresentation(bundle, 1, raw); !errors.Is(err, verify.ErrPresentation) {
		t.Fatalf("no such session: %v", err)
	}
}
